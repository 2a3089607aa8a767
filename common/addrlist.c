/* Lists of addresses in configuration values (addrlist.h). */
#include <errno.h>
#include <netdb.h>
#include <string.h>

#include "addrlist.h"
#include "net.h"

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* hosts: an item without a port is a host (port 0) */
static int parse(const char *list, struct sockaddr_in *out, int max, int hosts)
{
	/* parsed here first, so that out changes only on success */
	struct sockaddr_in tmp[ADDRLIST_MAX];
	char item[NI_MAXHOST + 8]; /* host, colon, port */
	const char *p = list;
	int n = 0;

	if (!list || !out || max < 1 || max > ADDRLIST_MAX)
		return -EINVAL;
	for (;;) {
		const char *end;
		size_t len;
		int rc;

		while (is_blank(*p))
			p++;
		end = p + strcspn(p, ",");
		len = (size_t)(end - p);
		while (len > 0 && is_blank(p[len - 1]))
			len--;
		if (len == 0 || len >= sizeof(item))
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		memcpy(item, p, len);
		item[len] = '\0';
		if (strpbrk(item, " \t"))
			return -EINVAL;
		if (hosts && !strchr(item, ':')) {
			if (len + 2 >= sizeof(item))
				return -EINVAL;
			memcpy(item + len, ":0", 3);
		}
		rc = net_parse_addr(item, &tmp[n]);
		if (rc < 0)
			return rc;
		n++;
		if (*end == '\0')
			break;
		p = end + 1;
	}
	memcpy(out, tmp, (size_t)n * sizeof(*out));
	return n;
}

int addrlist_parse(const char *list, struct sockaddr_in *out, int max)
{
	return parse(list, out, max, 0);
}

int addrlist_parse_near(const char *near, const char *far, struct sockaddr_in *out, int max,
			unsigned *n_near)
{
	int k = 0, n;

	if (near && near[strspn(near, " \t")] != '\0') {
		k = parse(near, out, max, 0);
		if (k < 0)
			return k;
	}
	if (k == max)
		return -E2BIG;
	n = parse(far, out + k, max - k, 0);
	if (n < 0)
		return n;
	*n_near = (unsigned)k;
	return k + n;
}

int addrlist_parse_hosts(const char *list, struct sockaddr_in *out, int max)
{
	if (list && list[strspn(list, " \t")] == '\0')
		return 0;
	return parse(list, out, max, 1);
}

int addrlist_has_host(const struct sockaddr_in *list, int n, const struct sockaddr_in *a)
{
	if (n == 0)
		return 1;
	for (int i = 0; i < n; i++)
		if (list[i].sin_addr.s_addr == a->sin_addr.s_addr)
			return 1;
	return 0;
}
