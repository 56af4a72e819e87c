/* SPDX-License-Identifier: Apache-2.0
 * dns.h - the egress proxy's resolver (docs/PROXY.md): A and
 * AAAA over c-ares, non-blocking, driven by the proxy's epoll loop.
 *
 * DNS only (never /etc/hosts), no search list, no cache, every address of
 * every answer returned; dns.c says why.
 *
 * The loop that drives it:
 *
 *	timeout = dns_next_timeout_ms(d, timeout);
 *	n = epoll_wait(epfd, evs, max, timeout);
 *	for each event whose data.u64 has the tag bits of @ev_tag:
 *		dns_handle(d, (int)(uint32_t)ev.data.u64, ev.events);
 *	dns_process_timeouts(d);	// after every epoll_wait, events or not
 *
 * Callbacks run only from dns_handle() and dns_process_timeouts(), never
 * from dns_resolve(), dns_set_servers() or dns_free(), and never from inside
 * c-ares: a callback may call dns_resolve() and dns_set_servers() (not
 * dns_free()).
 */
#ifndef AIRLOCK_DNS_H
#define AIRLOCK_DNS_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "policy.h"

#define DNS_TIMEOUT_MS_DEFAULT 5000

/* c-ares queries in flight at once (two per resolve). Further resolves
 * wait their turn in order; their deadline runs while they wait. */
#define DNS_MAX_QUERIES 128

/* Resolves alive at once (callback not yet called, or called but c-ares
 * still holding a query past the deadline); dns_resolve() refuses more. */
#define DNS_MAX_LIVE 32768

/* The status a callback receives. Keep dns_status_to_string() in sync (a
 * static_assert checks the table size). */
enum dns_status {
	DNS_OK = 0,
	DNS_NXDOMAIN,        /* "NXDOMAIN": the name does not exist */
	DNS_NODATA,          /* "no A or AAAA record": NOERROR, no address */
	DNS_TIMEOUT,         /* "timeout": nothing usable within timeout_ms */
	DNS_SERVFAIL,        /* "server failure (SERVFAIL, REFUSED or
				unreachable)": every try of every server
				answered SERVFAIL, REFUSED or NOTIMP, or
				could not be reached (ICMP unreachable, no
				socket). c-ares 1.18 reports all of these
				as one status (ECONNREFUSED). */
	DNS_FORMERR,         /* "server reported a format error" */
	DNS_BADRESP,         /* "malformed response" */
	DNS_NOMEM,           /* "out of memory" (in c-ares) */
	DNS_FAILED,          /* "resolver error": any other c-ares error */
	DNS_STATUS_COUNT
};

/* One line, no trailing newline; "ok" for DNS_OK. */
const char *dns_status_to_string(enum dns_status s);

struct dns;

/* Called exactly once per accepted dns_resolve() (unless dns_free() comes
 * first). @status is an enum dns_status.
 *  - DNS_OK: @n >= 1 addresses, every A answer (in the order of the A
 *    response) then every AAAA answer (in the order of the AAAA response),
 *    unfiltered and not deduplicated; @error is NULL. @addrs is valid only
 *    during the call (copy what you keep).
 *  - anything else: @addrs is NULL, @n is 0, @error is
 *    dns_status_to_string(@status).
 * A resolve succeeds when either query gave at least one address: if the
 * other one failed or had not answered by the deadline, only the addresses
 * received are returned. When both fail, the status is their common one,
 * else the one that is not DNS_NODATA, else DNS_NXDOMAIN if either is,
 * else the A query's. @cookie is dns_resolve()'s, passed back untouched. */
typedef void (*dns_cb)(void *arg, uint64_t cookie, int status,
		       const struct addr *addrs, size_t n, const char *error);

/* Creates a resolver whose c-ares sockets are registered in @epfd
 * (level-triggered) with data.u64 = @ev_tag | (uint32_t)fd; @ev_tag has its
 * low 32 bits zero. @servers (policy egress.resolver, asked in order, port
 * 1..65535) are copied; @nservers == 0 reads the host's resolv.conf now
 * (only its nameserver lines are used; resolv.conf is not read again until
 * dns_set_servers()). @timeout_ms bounds each resolve from dns_resolve() to
 * its callback; 0 means DNS_TIMEOUT_MS_DEFAULT. Every socket is
 * SOCK_NONBLOCK | SOCK_CLOEXEC from its creation.
 * Returns NULL with a one-line reason in @err on failure. */
struct dns *dns_new(int epfd, uint64_t ev_tag,
		    const struct policy_endpoint *servers, size_t nservers,
		    unsigned int timeout_ms, char *err, size_t errlen);

/* Starts resolving @name (copied), which must be a normalised DNS name as
 * hostname_normalise() produces it (lowercase, no trailing dot, not an IP
 * address). Asks A and AAAA, both as given: no search domain is appended.
 * The queries are sent now, or as soon as fewer than DNS_MAX_QUERIES are
 * in flight. Returns 0 when @cb will be called (later: never from within
 * this call), -EINVAL for a name that is not normalised, -EAGAIN when
 * DNS_MAX_LIVE resolves are alive; on error @cb is never called. */
int dns_resolve(struct dns *d, const char *name, dns_cb cb, void *arg,
		uint64_t cookie);

/* Handles @epoll_events for @fd, the low 32 bits of an event that carried
 * @ev_tag. An fd that is no longer the resolver's (a stale event from the
 * same epoll_wait batch) is ignored. May call callbacks. */
void dns_handle(struct dns *d, int fd, uint32_t epoll_events);

/* The epoll_wait timeout to use: the smaller of @max_ms (-1 = none) and the
 * time until the resolver next needs dns_process_timeouts(); 0 when
 * completed resolves wait to be delivered. Rounds up, so waking at it finds
 * the work due. */
int dns_next_timeout_ms(struct dns *d, int max_ms);

/* Retries and expires what is due and calls the callbacks of completed
 * resolves. Call it after every epoll_wait(). */
void dns_process_timeouts(struct dns *d);

/* Replaces the servers (policy reload) with the same rules as dns_new()
 * (@nservers == 0: resolv.conf, read again now). Resolves whose queries
 * were already sent finish on the old servers; queued ones go to the new.
 * Returns 0, or -1 with a one-line reason in @err and the old servers kept. */
int dns_set_servers(struct dns *d, const struct policy_endpoint *servers,
		    size_t nservers, char *err, size_t errlen);

/* Resolves whose callback is still due. */
size_t dns_pending(const struct dns *d);

/* Closes every socket (removing it from the epoll set) and frees @d. The
 * callbacks of resolves still pending are NOT called: the caller is
 * shutting down and owns whatever @arg/@cookie refer to. Not from within a
 * callback. NULL is a no-op. */
void dns_free(struct dns *d);

#endif /* AIRLOCK_DNS_H */
