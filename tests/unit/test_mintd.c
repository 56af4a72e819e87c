/* SPDX-License-Identifier: Apache-2.0
 * test_mintd.c - the supervisor's reading of the mint process's answer
 * (mintd_mint()): the answer is untrusted bytes. A well-formed answer
 * gives the token, its expiry and the granted scope built from the asked
 * names; a token with a byte the proxy could not inject, an empty one, a
 * repository or permission not asked, a higher level, an expiry in the
 * past, trailing bytes are each refused; an answer to an older request is
 * skipped; the mint's own error is shown printable; a mint process that
 * stopped (its last words) or whose channel is closed fails the mint
 * saying so.
 *
 * The mint process here is the test: it queues its answer on the other end
 * of the channel before mintd_mint() sends the request.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mintd.h"
#include "msg.h"
#include "tap.h"
#include "util.h"

static char *asked_repos[] = { "api", "lib" };
static struct ghapp_perm asked_perms[] = {
	{ "contents", POLICY_GH_WRITE },
	{ "metadata", POLICY_GH_READ },
};
static const struct ghapp_scope asked = {
	.owner = "acme", .repos = asked_repos, .nrepos = 2,
	.perms = asked_perms, .nperms = 2,
};

struct answer {
	uint32_t id_delta;        /* 1: the next request's id; 0: the last one's */
	uint64_t expires_in;      /* from now; UINT64_MAX: 0 (1970) */
	const char *repos[3];
	const char *perms[3];
	uint32_t levels[3];
	const char *token;
	bool trailing;
};

static void send_answer(int peer, const struct mintd *m, const struct answer *a)
{
	struct msg out = { 0 };
	size_t n, i;

	msg_start(&out, MSG_MINT_ANSWER);
	msg_put_u32(&out, m->last_id + a->id_delta);
	msg_put_u32(&out, 1);
	msg_put_u64(&out, a->expires_in == UINT64_MAX ? 0
						      : (uint64_t)time(NULL) + a->expires_in);
	for (n = 0; n < 3 && a->repos[n]; n++)
		;
	msg_put_u32(&out, (uint32_t)n);
	for (i = 0; i < n; i++)
		msg_put_cstr(&out, a->repos[i]);
	for (n = 0; n < 3 && a->perms[n]; n++)
		;
	msg_put_u32(&out, (uint32_t)n);
	for (i = 0; i < n; i++) {
		msg_put_cstr(&out, a->perms[i]);
		msg_put_u32(&out, a->levels[i]);
	}
	msg_put_bytes(&out, a->token, strlen(a->token));
	if (a->trailing)
		msg_put_u32(&out, 7);
	ASSERT(msg_send(peer, &out, -1, 0) == 0);
	msg_free(&out);
}

static void send_error(int peer, const struct mintd *m, const char *why)
{
	struct msg out = { 0 };

	msg_start(&out, MSG_MINT_ANSWER);
	msg_put_u32(&out, m->last_id + 1);
	msg_put_u32(&out, 0);
	msg_put_cstr(&out, why);
	ASSERT(msg_send(peer, &out, -1, 0) == 0);
	msg_free(&out);
}

#define GOOD(tok)                                                                    \
	{ .id_delta = 1, .expires_in = 3600, .repos = { "lib", "api" },             \
	  .perms = { "metadata", "contents" },                                      \
	  .levels = { POLICY_GH_READ, POLICY_GH_READ }, .token = (tok) }

int main(void)
{
	static const struct {
		const char *what;
		struct answer a;
		const char *err;
	} bad[] = {
		{ "a token with a space", GOOD("ghs_a b"), "bad message" },
		{ "a token with a control byte", GOOD("ghs_a\x1b[2J"), "bad message" },
		{ "an empty token", GOOD(""), "bad message" },
		{ "a repository not asked",
		  { .id_delta = 1, .expires_in = 3600, .repos = { "api", "secret" },
		    .token = "ghs_x" }, "granted scope other than" },
		{ "one repository too few",
		  { .id_delta = 1, .expires_in = 3600, .repos = { "api" }, .token = "ghs_x" },
		  "granted scope other than" },
		{ "a repository twice",
		  { .id_delta = 1, .expires_in = 3600, .repos = { "api", "api" },
		    .token = "ghs_x" }, "granted scope other than" },
		{ "a permission not asked",
		  { .id_delta = 1, .expires_in = 3600, .repos = { "api", "lib" },
		    .perms = { "administration" }, .levels = { POLICY_GH_READ },
		    .token = "ghs_x" }, "granted scope other than" },
		{ "a higher level",
		  { .id_delta = 1, .expires_in = 3600, .repos = { "api", "lib" },
		    .perms = { "metadata" }, .levels = { POLICY_GH_WRITE },
		    .token = "ghs_x" }, "granted scope other than" },
		{ "an unknown level",
		  { .id_delta = 1, .expires_in = 3600, .repos = { "api", "lib" },
		    .perms = { "metadata" }, .levels = { 9 }, .token = "ghs_x" },
		  "bad message" },
		{ "an expiry in the past",
		  { .id_delta = 1, .expires_in = UINT64_MAX, .repos = { "api", "lib" },
		    .token = "ghs_x" }, "expiry out of bounds" },
		{ "an expiry years ahead",
		  { .id_delta = 1, .expires_in = (uint64_t)5 * 366 * 86400,
		    .repos = { "api", "lib" }, .token = "ghs_x" }, "expiry out of bounds" },
		{ "trailing bytes",
		  { .id_delta = 1, .expires_in = 3600, .repos = { "api", "lib" },
		    .token = "ghs_x", .trailing = true }, "bad message" },
	};
	struct mintd m;
	struct ghapp_token tok;
	char err[600];
	int sv[2], rc;
	size_t i;

	signal(SIGPIPE, SIG_IGN);
	ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	memset(&m, 0, sizeof(m));
	m.pid = getpid(); /* stands for the mint process */
	m.ctl = sv[0];

	send_answer(sv[1], &m, &(struct answer)GOOD("ghs_good0123"));
	rc = mintd_mint(&m, "jwt", 4242, &asked, &tok, err, sizeof(err));
	tap_is_int(rc, 0, "a well-formed answer is taken");
	tap_ok(tok.value && tok.len == 12 && strcmp(tok.value, "ghs_good0123") == 0,
	       "with its token");
	tap_ok(tok.expires_at > time(NULL) + 3500 && tok.issued_at <= time(NULL),
	       "and its expiry");
	tap_ok(tok.granted.nrepos == 2 && strcmp(tok.granted.repos[0], "api") == 0 &&
		       strcmp(tok.granted.repos[1], "lib") == 0 &&
		       strcmp(tok.granted.owner, "acme") == 0,
	       "the granted repositories are the asked ones, in the asked order");
	tap_ok(tok.granted.nperms == 2 && strcmp(tok.granted.perms[0].name, "contents") == 0 &&
		       tok.granted.perms[0].level == POLICY_GH_READ &&
		       strcmp(tok.granted.perms[1].name, "metadata") == 0,
	       "the granted permissions at the granted (lower) levels, by the asked names");
	tap_ok(tok.granted.repos[0] != asked_repos[0], "copies of the asked names");
	ghapp_token_clear(&tok);

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		send_answer(sv[1], &m, &bad[i].a);
		rc = mintd_mint(&m, "jwt", 4242, &asked, &tok, err, sizeof(err));
		tap_ok(rc == -1 && !tok.value && strstr(err, bad[i].err) &&
			       !strstr(err, "ghs_"),
		       "%s: refused (%s)", bad[i].what, err);
	}

	/* an answer that came too late for the last request, then this one's */
	send_answer(sv[1], &m, &(struct answer){ .id_delta = 0, .expires_in = 3600,
						 .repos = { "api", "lib" },
						 .token = "ghs_stale" });
	send_answer(sv[1], &m, &(struct answer)GOOD("ghs_fresh"));
	rc = mintd_mint(&m, "jwt", 4242, &asked, &tok, err, sizeof(err));
	tap_ok(rc == 0 && tok.value && strcmp(tok.value, "ghs_fresh") == 0,
	       "an older request's answer is skipped, this one's taken");
	ghapp_token_clear(&tok);

	send_error(sv[1], &m, "token mint at api.test: HTTP 500: \x1b]0;owned\x07 boom");
	rc = mintd_mint(&m, "jwt", 4242, &asked, &tok, err, sizeof(err));
	tap_is_int(rc, -1, "the mint's error fails the mint");
	tap_is_str(err, "token mint at api.test: HTTP 500: ?]0;owned? boom",
		   "its error is shown printable");

	{
		struct msg out = { 0 };

		msg_start(&out, MSG_FATAL);
		msg_put_cstr(&out, "landlock: Permission denied");
		ASSERT(msg_send(sv[1], &out, -1, 0) == 0);
		msg_free(&out);
	}
	rc = mintd_mint(&m, "jwt", 4242, &asked, &tok, err, sizeof(err));
	tap_is_int(rc, -1, "last words fail the mint");
	tap_is_str(err, "the token mint process (airlock-mint) has stopped (landlock: "
			"Permission denied): no token can be minted", "saying why it stopped");

	m.fatal[0] = '\0'; /* a mint process that said nothing */
	close(sv[1]);
	rc = mintd_mint(&m, "jwt", 4242, &asked, &tok, err, sizeof(err));
	tap_is_int(rc, -1, "a closed channel fails the mint");
	tap_is_str(err, "the token mint process (airlock-mint) has ended: no token can be "
			"minted", "saying the mint process has ended");

	mintd_reaped(&m, SIGKILL); /* a wait status: killed by signal 9 */
	rc = mintd_mint(&m, "jwt", 4242, &asked, &tok, err, sizeof(err));
	tap_is_int(rc, -1, "once reaped, every mint fails");
	tap_is_str(err, "the token mint process (airlock-mint) has ended (killed by signal 9): "
			"no token can be minted", "naming how it ended");
	return tap_done();
}
