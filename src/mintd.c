/* SPDX-License-Identifier: Apache-2.0
 * mintd.c - see mintd.h.
 *
 * DOC: Theory of Operation
 *
 * SPEC §4: no process that holds a secret value parses bytes it did not
 * make. The GitHub App token's mint parses an HTTP answer and a JSON body
 * from the network (whatever answers at the API's address), so it is not
 * the supervisor, which holds every secret value, but a process of its
 * own, "airlock-mint", forked by the supervisor before the secrets are
 * read (supervisor_open()):
 *
 *   1. child_start(): not dumpable, dies with the supervisor, keeps only
 *      stderr and its channel (not the key holder's), the environment
 *      wiped but for OpenSSL's and c-ares' variables;
 *   2. it confines itself (CONFINE_MINT): no capabilities, a seccomp
 *      allowlist of a TCP/UDP client's calls (no exec, fork, listen,
 *      accept, unix sockets, files opened for writing), Landlock letting
 *      it read only the trust store, resolv.conf and the like, and the
 *      policy's CA files (git.github_app.ca, egress.upstream_ca), which
 *      OpenSSL and c-ares read at each mint;
 *   3. it waits for a mint message: the JWT the key holder signed (the
 *      supervisor asked for it), the installation and the scope the
 *      supervisor made from the policy in force. It makes the request
 *      (ghapp_mint_scope(): the policy's resolvers, the address checks,
 *      the API's certificate), checks the answer against the scope,
 *      answers with the token, its expiry and what was granted (or one
 *      line of error), and wipes the JWT, the request and the token;
 *   4. it exits when its channel closes.
 *
 * What it holds: the policy (a copy from the fork), for each mint a JWT
 * valid ten minutes and the token it returns, until it has sent it (the
 * buffers are wiped, including jansson's and OpenSSL's). Not the App's
 * key (the key holder's), not a secret value (forked before they were
 * read).
 *
 * The supervisor reads the answer as untrusted bytes (mintd_mint()):
 * lengths bounded, the token's bytes checked as the proxy needs them,
 * the expiry in the future, the granted scope no wider than asked, and
 * only the names it asked for kept. A mint process that has ended, does
 * not answer in time or answers nonsense is a failed mint: at start the
 * session is refused, later git.token records a block and the old token
 * stays in force until it expires, as for any failed mint (gitcred.c).
 * It is not started again.
 *
 * Should: mint as the supervisor did, with the same errors. Mustn't:
 * hold a key or a secret value, outlive the supervisor, hand the
 * supervisor anything it did not check.
 */
#include "mintd.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "confine.h"
#include "msg.h"
#include "util.h"

/* Bounds of the fields (GitHub: names of at most 100 characters). */
#define JWT_MAX ((size_t)16 * 1024)
#define NAME_MAX_LEN 100
#define PERMS_MAX 64
/* The latest expiry taken (GitHub's tokens live an hour). */
#define EXPIRY_MAX_S ((time_t)366 * 24 * 3600)

/* --- the scope on the wire -------------------------------------------------- */

/* u32 nrepos, nrepos x str, u32 nperms, nperms x (str name, u32 level) */
static void put_lists(struct msg *m, const struct ghapp_scope *s)
{
	size_t i;

	msg_put_u32(m, (uint32_t)s->nrepos);
	for (i = 0; i < s->nrepos; i++)
		msg_put_cstr(m, s->repos[i]);
	msg_put_u32(m, (uint32_t)s->nperms);
	for (i = 0; i < s->nperms; i++) {
		msg_put_cstr(m, s->perms[i].name);
		msg_put_u32(m, (uint32_t)s->perms[i].level);
	}
}

/* The lists of put_lists() into @s (owner untouched), every count and
 * length bounded, every level known. False on the first bad field. */
static bool get_lists(struct msg_reader *r, struct ghapp_scope *s)
{
	uint32_t n = 0, i, level = 0;
	const char *v;

	if (!msg_get_u32(r, &n) || n > GHAPP_REPOS_MAX)
		return false;
	s->repos = util_xcalloc(n ? n : 1, sizeof(*s->repos));
	for (i = 0; i < n; i++) {
		if (!msg_get_str(r, NAME_MAX_LEN, &v, NULL))
			return false;
		s->repos[s->nrepos++] = util_xstrdup(v);
	}
	if (!msg_get_u32(r, &n) || n > PERMS_MAX)
		return false;
	s->perms = util_xcalloc(n ? n : 1, sizeof(*s->perms));
	for (i = 0; i < n; i++) {
		if (!msg_get_str(r, NAME_MAX_LEN, &v, NULL) || !msg_get_u32(r, &level) ||
		    level >= POLICY_GH_ACCESS_COUNT)
			return false;
		s->perms[s->nperms].name = util_xstrdup(v);
		s->perms[s->nperms++].level = (enum policy_gh_access)level;
	}
	return true;
}

/* --- the mint process ------------------------------------------------------- */

static void wipe_msg(struct msg *m)
{
	if (m->buf)
		explicit_bzero(m->buf, m->cap);
}

/* One MSG_MINT in @r: the mint, then the answer on @ctl. */
static void serve_one(const struct policy *p, int ctl, struct msg_reader *r, struct msg *out)
{
	struct ghapp_scope asked;
	struct ghapp_token tok;
	const char *jwt, *owner;
	uint64_t inst = 0;
	uint32_t id = 0;
	char err[MINTD_ERROR_MAX];
	int rc;

	memset(&asked, 0, sizeof(asked));
	if (!msg_get_u32(r, &id) || !msg_get_u64(r, &inst) ||
	    !msg_get_str(r, NAME_MAX_LEN, &owner, NULL) || !get_lists(r, &asked) ||
	    !msg_get_str(r, JWT_MAX, &jwt, NULL) || !msg_end(r)) {
		ghapp_scope_free(&asked);
		child_fatal("a bad mint request: %s", r->error ? r->error : "bad field");
	}
	asked.owner = util_xstrdup(owner);
	err[0] = '\0';
	rc = ghapp_mint_scope(p, inst, &asked, jwt, 0, &tok, err, sizeof(err));
	msg_start(out, MSG_MINT_ANSWER);
	msg_put_u32(out, id);
	msg_put_u32(out, rc == 0 ? 1u : 0u);
	if (rc == 0) {
		/* The token last: a buffer that grows after it would leave a
		 * copy in the block it was moved from. */
		msg_put_u64(out, (uint64_t)tok.expires_at);
		put_lists(out, &tok.granted);
		msg_put_bytes(out, tok.value, tok.len);
	} else {
		msg_put_cstr(out, err);
	}
	rc = msg_send(ctl, out, -1, 0);
	wipe_msg(out);
	ghapp_token_clear(&tok);
	ghapp_scope_free(&asked);
	/* EPIPE: the supervisor closed the channel, the session is ending. */
	if (rc == -EPIPE || rc == -ECONNRESET)
		_exit(0);
	if (rc < 0)
		child_fatal("cannot answer the supervisor: %s", strerror(-rc));
}

__attribute__((noreturn)) static void mintd_main(const struct policy *p, int ctl, pid_t parent)
{
	const int keep[] = { STDERR_FILENO, ctl };
	const char *paths[CONFINE_CLIENT_READS_MAX + 2];
	uint8_t *buf = util_xmalloc(MSG_MAX);
	struct msg out = { 0 };
	struct msg_reader r;
	char err[512], *owned[CONFINE_CLIENT_OWNED_MAX];
	size_t n, nowned, k;

	child_start(&(struct child_spec){ .name = MINTD_PROC_NAME, .who = "token mint",
					  .parent = parent, .ctl = ctl, .keep = keep,
					  .nkeep = ARRAY_SIZE(keep),
					  .ignore_session_signals = true,
					  .keep_env = confine_client_env });
	n = confine_client_reads(paths, owned, &nowned);
	if (p->git_github_app->ca)
		paths[n++] = p->git_github_app->ca;
	if (p->upstream_ca)
		paths[n++] = p->upstream_ca;
	if (confine_self(CONFINE_MINT, paths, n, err, sizeof(err)) < 0)
		child_fatal("%s", err);
	for (k = 0; k < nowned; k++)
		free(owned[k]);
	for (;;) {
		int fd;
		ssize_t got = msg_recv(ctl, buf, MSG_MAX, &fd, 0);

		if (fd >= 0)
			close(fd);
		if (got == -EINTR)
			continue;
		/* The supervisor closes the channel to end the mint. */
		if (got == 0 || got == -ECONNRESET)
			_exit(0);
		if (got < 0)
			child_fatal("its channel: %s", strerror((int)-got));
		if (!msg_reader_init(&r, MSG_CHAN_MINT, buf, (size_t)got) || r.type != MSG_MINT)
			child_fatal("the supervisor sent %s, not a mint request",
				    r.error ? r.error : msg_type_to_string(r.type));
		serve_one(p, ctl, &r, &out);
		explicit_bzero(buf, (size_t)got); /* the JWT */
	}
}

int mintd_start(struct mintd *m, const struct policy *p, char *err, size_t errlen)
{
	pid_t parent = getpid();
	int sv[2];

	memset(m, 0, sizeof(*m));
	m->pid = -1;
	m->ctl = -1;
	ASSERT(p->git_github_app);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "token mint: socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	m->pid = fork();
	if (m->pid < 0) {
		snprintf(err, errlen, "token mint: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (m->pid == 0) {
		close(sv[0]);
		mintd_main(p, sv[1], parent);
	}
	close(sv[1]);
	m->ctl = sv[0];
	return 0;
}

/* --- the supervisor's side ---------------------------------------------------- */

/* Why the mint process cannot answer, into @err. */
static void ended(const struct mintd *m, const char *what, char *err, size_t errlen)
{
	if (m->reaped) {
		char how[256];

		mintd_describe_exit(m, how, sizeof(how));
		snprintf(err, errlen, "the token mint process (%s) has ended (%s): no token "
				      "can be minted", MINTD_PROC_NAME, how);
	} else if (m->fatal[0]) {
		snprintf(err, errlen, "the token mint process (%s) %s (%s): no token can be "
				      "minted", MINTD_PROC_NAME, what, m->fatal);
	} else {
		snprintf(err, errlen, "the token mint process (%s) %s: no token can be "
				      "minted", MINTD_PROC_NAME, what);
	}
}

/* The mint's error, shown printable. */
static void shown(const char *s, char *out, size_t outlen)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < outlen; i++) {
		unsigned char c = (unsigned char)s[i];

		out[i] = s[i];
		if (c < 0x20 || c >= 0x7f)
			out[i] = '?';
	}
	out[i] = '\0';
}

/* The granted scope of an answer (@got, untrusted) checked against
 * @asked: exactly the asked repositories, each once; permissions among
 * the asked, each once, at no higher level. @out is built from @asked's
 * names. */
static bool granted_ok(const struct ghapp_scope *asked, const struct ghapp_scope *got,
		       struct ghapp_scope *out)
{
	bool *seen = util_xcalloc(asked->nrepos + asked->nperms + 1, sizeof(*seen));
	enum policy_gh_access *level = util_xcalloc(asked->nperms + 1, sizeof(*level));
	bool ok = false;
	size_t i, j;

	memset(out, 0, sizeof(*out));
	if (got->nrepos != asked->nrepos)
		goto out;
	for (i = 0; i < got->nrepos; i++) {
		for (j = 0; j < asked->nrepos && strcmp(got->repos[i], asked->repos[j]) != 0; j++)
			;
		if (j == asked->nrepos || seen[j])
			goto out;
		seen[j] = true;
	}
	for (i = 0; i < got->nperms; i++) {
		for (j = 0;
		     j < asked->nperms && strcmp(got->perms[i].name, asked->perms[j].name) != 0;
		     j++)
			;
		if (j == asked->nperms || seen[asked->nrepos + j] ||
		    got->perms[i].level > asked->perms[j].level)
			goto out;
		seen[asked->nrepos + j] = true;
		level[j] = got->perms[i].level;
	}
	out->owner = util_xstrdup(asked->owner);
	out->repos = util_xcalloc(asked->nrepos + 1, sizeof(*out->repos));
	for (j = 0; j < asked->nrepos; j++)
		out->repos[out->nrepos++] = util_xstrdup(asked->repos[j]);
	out->perms = util_xcalloc(asked->nperms + 1, sizeof(*out->perms));
	for (j = 0; j < asked->nperms; j++) {
		if (!seen[asked->nrepos + j])
			continue;
		out->perms[out->nperms].name = util_xstrdup(asked->perms[j].name);
		out->perms[out->nperms++].level = level[j];
	}
	ok = true;
out:
	free(seen);
	free(level);
	return ok;
}

/* One answer in @r for request @id: 1 with @out filled, 0 when it is an
 * older request's (skipped), -1 with @err. */
static int read_answer(struct mintd *m, struct msg_reader *r, const struct ghapp_scope *asked,
		       struct ghapp_token *out, char *err, size_t errlen)
{
	struct ghapp_scope got;
	const void *tok;
	const char *why;
	uint32_t id = 0, ok = 0;
	uint64_t exp = 0;
	size_t tlen = 0;
	time_t now = time(NULL);
	char text[MINTD_ERROR_MAX];
	int rc = -1;

	memset(&got, 0, sizeof(got));
	if (r->type == MSG_FATAL) {
		if (msg_get_str(r, sizeof(m->fatal) - 1, &why, NULL) && msg_end(r))
			shown(why, m->fatal, sizeof(m->fatal));
		ended(m, "has stopped", err, errlen);
		return -1;
	}
	if (r->type != MSG_MINT_ANSWER || !msg_get_u32(r, &id) || !msg_get_u32(r, &ok) || ok > 1)
		goto bad;
	if (id != m->last_id) {
		/* an answer that came too late for an earlier request */
		if (id < m->last_id)
			return 0;
		goto bad;
	}
	if (!ok) {
		if (!msg_get_str(r, MINTD_ERROR_MAX - 1, &why, NULL) || !msg_end(r))
			goto bad;
		shown(why, text, sizeof(text));
		snprintf(err, errlen, "%s", text);
		return -1;
	}
	if (!msg_get_u64(r, &exp) || !get_lists(r, &got) ||
	    !msg_get_bytes(r, GHAPP_TOKEN_MAX, &tok, &tlen) || !ghapp_token_ok(tok, tlen) ||
	    !msg_end(r))
		goto bad;
	if (exp > (uint64_t)INT64_MAX || (time_t)exp <= now || (time_t)exp > now + EXPIRY_MAX_S) {
		snprintf(err, errlen, "the token mint process (%s) answered an expiry out of "
				      "bounds", MINTD_PROC_NAME);
		goto out;
	}
	if (!granted_ok(asked, &got, &out->granted)) {
		snprintf(err, errlen, "the token mint process (%s) answered a granted scope "
				      "other than the asked repositories or wider than the asked "
				      "permissions", MINTD_PROC_NAME);
		goto out;
	}
	out->value = util_xmalloc(tlen + 1);
	memcpy(out->value, tok, tlen);
	out->value[tlen] = '\0';
	out->len = tlen;
	out->expires_at = (time_t)exp;
	out->issued_at = now;
	rc = 1;
	goto out;
bad:
	snprintf(err, errlen, "the token mint process (%s) answered with a bad message%s%s",
		 MINTD_PROC_NAME, r->error ? ": " : "", r->error ? r->error : "");
out:
	ghapp_scope_free(&got);
	return rc;
}

int mintd_mint(struct mintd *m, const char *jwt, uint64_t installation_id,
	       const struct ghapp_scope *asked, struct ghapp_token *out, char *err,
	       size_t errlen)
{
	uint64_t deadline = util_now_ms() + MINTD_WAIT_MS;
	uint8_t *buf = NULL;
	struct msg req = { 0 };
	int rc = -1, r;

	memset(out, 0, sizeof(*out));
	if (m->ctl < 0 || m->pid < 0) {
		ended(m, "is not running", err, errlen);
		return -1;
	}
	/* The JWT last, as the token in the answer (serve_one()). */
	msg_start(&req, MSG_MINT);
	msg_put_u32(&req, ++m->last_id);
	msg_put_u64(&req, installation_id);
	msg_put_cstr(&req, asked->owner);
	put_lists(&req, asked);
	msg_put_cstr(&req, jwt);
	r = msg_send(m->ctl, &req, -1, 0);
	wipe_msg(&req);
	msg_free(&req);
	if (r < 0) {
		ended(m, r == -EPIPE || r == -ECONNRESET || r == -ECONNREFUSED
				 ? "has ended" : "cannot be reached", err, errlen);
		return -1;
	}
	buf = util_xmalloc(MSG_MAX);
	while (rc < 0) {
		uint64_t now = util_now_ms();
		struct pollfd pfd = { m->ctl, POLLIN, 0 };
		struct msg_reader rd;
		ssize_t n;
		int fd;

		if (now >= deadline) {
			ended(m, "did not answer in time", err, errlen);
			break;
		}
		r = poll(&pfd, 1, (int)(deadline - now));
		if (r < 0 && errno != EINTR) {
			snprintf(err, errlen, "token mint: poll: %s", strerror(errno));
			break;
		}
		if (r <= 0)
			continue;
		n = msg_recv(m->ctl, buf, MSG_MAX, &fd, MSG_DONTWAIT);
		if (fd >= 0)
			close(fd);
		if (n == -EAGAIN || n == -EINTR)
			continue;
		if (n <= 0) {
			ended(m, "has ended", err, errlen);
			break;
		}
		if (!msg_reader_init(&rd, MSG_CHAN_MINT, buf, (size_t)n)) {
			snprintf(err, errlen, "the token mint process (%s) answered with a bad "
					      "message: %s", MINTD_PROC_NAME, rd.error);
			explicit_bzero(buf, (size_t)n);
			break;
		}
		r = read_answer(m, &rd, asked, out, err, errlen);
		explicit_bzero(buf, (size_t)n); /* a token */
		if (r < 0)
			break;
		if (r == 1)
			rc = 0;
	}
	free(buf);
	if (rc != 0)
		ghapp_token_clear(out);
	return rc;
}

void mintd_stop(struct mintd *m)
{
	if (m->ctl >= 0)
		close(m->ctl);
	m->ctl = -1;
}

void mintd_reaped(struct mintd *m, int wstatus)
{
	m->pid = -1;
	m->wstatus = wstatus;
	m->reaped = true;
	child_read_last_words(m->ctl, m->fatal, sizeof(m->fatal));
	if (m->ctl >= 0)
		close(m->ctl);
	m->ctl = -1;
}

void mintd_describe_exit(const struct mintd *m, char *out, size_t len)
{
	child_describe_exit(m->wstatus, m->fatal, out, len);
}
