/* SPDX-License-Identifier: Apache-2.0
 * publish.h - inbound ports (SPEC §5.6, docs/SANDBOX.md "Publishing"): the
 * policy's `publish` listeners and the relay process that serves them.
 *
 * The relay ("airlock-publish") is one process forked by the supervisor
 * before any secret is read. It binds the listeners on the host, then
 * waits for the sandbox: it gets the descriptors of the sandbox's user and
 * network namespaces (passed out by the sandbox's init) and, for each
 * listener with `auth`, the SHA-256 of the secret's value (never the
 * value). It joins the sandbox's network namespace (so that the only
 * sockets it can open are on the sandbox's loopback), confines itself
 * like a proxy worker, and relays each accepted connection to the
 * listener's port on 127.0.0.1 there. Its receipts go to the key holder
 * over a channel of its own, like a proxy worker's.
 */
#ifndef AIRLOCK_PUBLISH_H
#define AIRLOCK_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"

struct session;
struct broker;
struct sandbox;

/* Parses `--publish [ADDR:]PORT:SANDBOX_PORT` (ADDR an IP literal, IPv6
 * in brackets; default 127.0.0.1) into @listen ("ADDR:PORT", at least
 * ADDR_STRLEN + 8 bytes) and *@port. Returns false with the reason in
 * @why. */
bool publish_parse_arg(const char *arg, char *listen, size_t listen_len,
		       uint16_t *port, char *why, size_t whylen);

/* Adds the @n --publish arguments @args (protocol http, the other keys at
 * their defaults) to *@p's publish list: the policy is parsed again, so
 * that they are validated and in its canonical form and digest like the
 * entries of the file. Dies with 125 and one line on an invalid one. */
void publish_merge_args(struct policy **p, char *const *args, size_t n);

/* Before any secret is read, with the key holder running: checks the
 * listeners (enforce refuses a wildcard or non-loopback listen without
 * exposed, and a sandbox port that airlock itself serves) and forks the
 * relay, which binds them. Does nothing without publish entries. Returns
 * 0, or -1 with one line in @err (nothing left running). */
int publish_start(struct session *s, const struct policy *p, char *err, size_t errlen);

/* Is the relay running (the sandbox must pass its namespaces out)? */
bool publish_active(void);

/* After the sandbox started: gives the relay the sandbox's namespaces
 * (@sb->ns_fd, closed here) and the digests of the auth secrets' values
 * from @b, and waits until it serves. Returns 0, or -1 with @err. */
int publish_attach(struct sandbox *sb, const struct broker *b, char *err, size_t errlen);

/* The supervisor reaped @pid with @wstatus: true when it was the relay
 * (recorded as proxy.error when it was not asked to stop). */
bool publish_reaped(pid_t pid, int wstatus);

/* The relay's pid, or -1 when none runs. */
pid_t publish_pid(void);

/* Stops the relay (SIGKILL) and reaps it. */
void publish_stop(void);

/* --- inside the relay: one HTTP exchange's checks, shared with the tests --- */

/* The value an HTTP request carries for auth: the token of
 * `Authorization: Bearer TOKEN` (header value @authz, NULL: none), else
 * the value of the cookie named @cookie (NULL: none) in the Cookie header
 * value @cookies (NULL: none). Returns a pointer into the values and its
 * length in *@len, or NULL. */
const char *publish_auth_value(const char *authz, size_t authz_len,
			       const char *cookies, size_t cookies_len,
			       const char *cookie, size_t *len);

/* @cookies without the cookies named @name, written to @out (at least
 * @cookies_len + 1 bytes); returns its length (0: none left). */
size_t publish_strip_cookie(const char *cookies, size_t cookies_len, const char *name,
			    char *out);

#endif /* AIRLOCK_PUBLISH_H */
