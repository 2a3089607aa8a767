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

int addrlist_parse(const char *list, struct sockaddr_in *out, int max)
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
