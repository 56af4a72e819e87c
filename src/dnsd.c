/* SPDX-License-Identifier: Apache-2.0
 * dnsd.c - see dnsd.h.
 *
 * DOC: Theory of Operation
 *
 * In transparent mode the sandbox resolves every name through airlock's
 * DNS stub (docs/TRANSPARENT.md), so the stub parses datagrams the agent
 * wrote. SPEC §4: no process that holds a secret value, a key or a token
 * parses bytes from the sandbox, but the proxy workers. So the stub is a
 * process of its own, "airlock-dns", forked by the supervisor once the
 * sandbox's socket and the table of synthetic addresses exist:
 *
 *   1. child_start(): not dumpable, dies with the supervisor, keeps only
 *      stderr, the stub's UDP socket and its channel, environment wiped;
 *   2. the caller's forget() wipes the secret values and the git token
 *      from its copy of the supervisor's memory (as the sandbox's init
 *      does), and closes the channel to the key holder;
 *   3. it builds its stub (the policy's rules, the table's writable
 *      mapping, which it is the only process to hold once the supervisor
 *      frees its own after forking the workers) and confines itself:
 *      the workers' seccomp filter, Landlock with nothing to open, no
 *      capabilities;
 *   4. it answers every datagram; a refused name is a dns-block message
 *      to the supervisor, which records dns.block (point supervisor, as
 *      before) from the checked fields: the stub holds no channel to the
 *      key holder, and what it can make the supervisor record is a
 *      dns.block line, no more;
 *   5. it exits when its channel closes (the sandbox's init has ended).
 *
 * A stub that ends on its own takes the sandbox's names with it: the
 * supervisor ends the session (125) after recording proxy.error with rule
 * dns.stub, as for a lost worker.
 *
 * Should: answer as the supervisor's stub did, record the same lines.
 * Mustn't: hold a secret value, a key or a token; open any file; outlive
 * the supervisor.
 */
#include "dnsd.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "confine.h"
#include "msg.h"
#include "transparent.h"
#include "util.h"

static void send_block(int ctl, struct msg *m, const struct dnsstub_result *res)
{
	int r;

	msg_start(m, MSG_DNS_BLOCK);
	msg_put_u32(m, res->would_block ? 1u : 0u);
	msg_put_cstr(m, res->rule_id);
	msg_put_cstr(m, res->display);
	msg_put_u32(m, res->qtype);
	msg_put_u32(m, (uint32_t)res->outcome);
	msg_put_cstr(m, res->reason ? res->reason : "refused");
	r = msg_send(ctl, m, -1, 0);

	/* EPIPE: the supervisor closed the channel, the session is ending. */
	if (r == -EPIPE || r == -ECONNRESET)
		_exit(0);
	if (r < 0)
		child_fatal("cannot send a refusal to the supervisor: %s", strerror(-r));
}

__attribute__((noreturn)) static void dnsd_main(const struct policy *p,
						struct dnsstub_table *table, int stub_fd,
						int ctl, pid_t parent,
						void (*forget)(void *), void *arg)
{
	const int keep[] = { STDERR_FILENO, stub_fd, ctl };
	struct dnsstub_result res;
	struct dnsstub *stub;
	struct msg out = { 0 };
	char err[512];

	child_start(&(struct child_spec){ .name = DNSD_PROC_NAME, .who = "DNS stub",
					  .parent = parent, .ctl = ctl, .keep = keep,
					  .nkeep = ARRAY_SIZE(keep),
					  .ignore_session_signals = true });
	if (forget)
		forget(arg);
	stub = dnsstub_new(p, table);
	if (confine_self(CONFINE_WORKER, NULL, 0, err, sizeof(err)) < 0)
		child_fatal("%s", err);
	for (;;) {
		struct pollfd pfd[2] = { { stub_fd, POLLIN, 0 }, { ctl, POLLIN, 0 } };
		int i;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			child_fatal("poll: %s", strerror(errno));
		}
		/* The supervisor closes the channel to end the stub; it
		 * sends nothing else. */
		if (pfd[1].revents)
			_exit(0);
		/* Bounded: the next poll() comes back for the rest. A socket
		 * error is logged and the socket kept: the stub must outlive
		 * one bad datagram. */
		for (i = 0; i < 64; i++) {
			int r = transparent_stub_serve(stub_fd, stub, &res);

			if (r < 0) {
				util_warn("DNS stub: %s", strerror(-r));
				break;
			}
			if (r == 0)
				break;
			if (res.record)
				send_block(ctl, &out, &res);
		}
	}
}

int dnsd_start(struct dnsd *d, const struct policy *p, struct dnsstub_table *table,
	       int stub_fd, void (*forget)(void *), void *arg, char *err,
	       size_t errlen)
{
	pid_t parent = getpid();
	int sv[2];

	memset(d, 0, sizeof(*d));
	d->pid = -1;
	d->ctl = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "DNS stub: socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	d->pid = fork();
	if (d->pid < 0) {
		snprintf(err, errlen, "DNS stub: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (d->pid == 0) {
		close(sv[0]);
		dnsd_main(p, table, stub_fd, sv[1], parent, forget, arg);
	}
	close(sv[1]);
	d->ctl = sv[0];
	return 0;
}

bool dnsd_read(struct dnsd *d, void (*on_block)(void *arg, const struct dnsd_block *b),
	       void *arg)
{
	uint8_t *buf = util_xmalloc(MSG_MAX);
	struct msg_reader r;
	struct dnsd_block b;
	bool ok = true;
	int fd;

	while (ok) {
		ssize_t n = msg_recv(d->ctl, buf, MSG_MAX, &fd, MSG_DONTWAIT);
		uint32_t wb = 0, qtype = 0, outcome = 0;
		const char *reason;

		if (fd >= 0) {
			close(fd);
			ok = false;
			break;
		}
		if (n == -EAGAIN)
			break;
		if (n <= 0 || !msg_reader_init(&r, MSG_CHAN_DNS, buf, (size_t)n)) {
			ok = false;
			break;
		}
		if (r.type == MSG_FATAL) {
			if (msg_get_str(&r, sizeof(d->fatal) - 1, &reason, NULL) && msg_end(&r))
				(void)util_strlcpy(d->fatal, reason, sizeof(d->fatal));
			ok = false;
			break;
		}
		if (r.type != MSG_DNS_BLOCK || !msg_get_u32(&r, &wb) ||
		    !msg_get_str(&r, EGRESS_RULE_ID_MAX - 1, &b.rule, NULL) ||
		    !msg_get_str(&r, DNSSTUB_DISPLAY_MAX - 1, &b.host, NULL) ||
		    !msg_get_u32(&r, &qtype) || !msg_get_u32(&r, &outcome) ||
		    !msg_get_str(&r, DNSD_REASON_MAX, &b.reason, NULL) || !msg_end(&r) ||
		    wb > 1 || qtype > 65535 || outcome >= DNSSTUB_OUTCOME_COUNT) {
			util_warn("DNS stub: a bad message on its channel: %s",
				  r.error ? r.error : msg_type_to_string(r.type));
			ok = false;
			break;
		}
		b.would_block = wb == 1;
		b.qtype = qtype;
		b.outcome = (enum dnsstub_outcome)outcome;
		on_block(arg, &b);
	}
	free(buf);
	return ok;
}

void dnsd_stop(struct dnsd *d)
{
	d->stopping = true;
	if (d->ctl >= 0)
		close(d->ctl);
	d->ctl = -1;
}

void dnsd_reaped(struct dnsd *d, int wstatus)
{
	d->pid = -1;
	d->wstatus = wstatus;
	child_read_last_words(d->ctl, d->fatal, sizeof(d->fatal));
	if (d->ctl >= 0)
		close(d->ctl);
	d->ctl = -1;
}

void dnsd_describe_exit(const struct dnsd *d, char *out, size_t len)
{
	child_describe_exit(d->wstatus, d->fatal, out, len);
}
