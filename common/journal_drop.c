/* Journal retention: whole segments at the head of a journal removed (or
 * moved aside for an archive) once every record in them is below a
 * sequence number that the caller no longer needs (journal.h,
 * journal_drop_before). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "journal_private.h"

/* Opens move_to (made when missing: then its parent is synced so that the
 * new directory lasts). A descriptor or -errno. */
static int open_move_dir(const char *move_to)
{
	int fd, r;

	if (mkdir(move_to, 0755) == 0) {
		if ((r = durable_sync_parent(move_to)) < 0)
			return r;
	} else if (errno != EEXIST) {
		return -errno;
	}
	fd = open(move_to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Forgets segments 0 .. n-1 (their files are gone): the index, the read
 * descriptor and cache (segment numbers shift: gen++ also stales them and
 * every iterator), the term runs wholly before the new first record. */
static void forget_head(struct journal *j, unsigned n)
{
	uint64_t first;
	size_t r = 0;

	if (!n)
		return;
	for (unsigned i = 0; i < n; i++)
		free(j->segs[i].off);
	memmove(j->segs, j->segs + n, (j->nsegs - n) * sizeof(*j->segs));
	j->nsegs -= n;
	journal_rfd_drop(j);
	j->gen++;
	first = j->segs[0].first_seq;
	while (r + 1 < j->nruns && j->runs[r + 1].seq <= first)
		r++;
	if (r) {
		memmove(j->runs, j->runs + r, (j->nruns - r) * sizeof(*j->runs));
		j->nruns -= r;
	}
}

int journal_drop_before(struct journal *j, uint64_t seq, const char *move_to)
{
	unsigned n = 0, done = 0;
	int mfd = -1, r = 0;
	char name[32];

	if (j->opt.read_only)
		return -EROFS;
	if (is_empty(j))
		return 0;
	/* segment k holds [first_k, first_k+1 - 1]: all below seq when the
	 * next one starts at or below it; the last segment always stays */
	while (n + 1 < j->nsegs && j->segs[n + 1].first_seq <= seq)
		n++;
	if (!n)
		return 0;
	if (move_to && (mfd = open_move_dir(move_to)) < 0)
		return mfd;
	/* oldest first: a crash midway leaves a journal that is contiguous,
	 * only shorter at its head */
	for (; done < n; done++) {
		journal_seg_name(name, j->segs[done].first_seq);
		if (move_to ? renameat2(j->dfd, name, mfd, name, RENAME_NOREPLACE) < 0
			    : unlinkat(j->dfd, name, 0) < 0) {
			r = -errno;
			break;
		}
	}
	forget_head(j, done);
	/* the destination first: once it is synced the moved segments are
	 * known to be there, whatever the journal's directory says after a
	 * crash (a segment still listed there is only kept a while longer) */
	if (mfd >= 0) {
		if (done && fsync(mfd) < 0 && r == 0)
			r = -errno;
		close(mfd);
	}
	if (done && fsync(j->dfd) < 0 && r == 0)
		r = -errno;
	return r;
}
