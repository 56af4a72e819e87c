/* SPDX-License-Identifier: Apache-2.0
 * stdio_relay.h - the agent's standard descriptors: the caller's own where
 * they are a terminal or a pipe, else pipes that a relay process outside
 * the sandbox copies to and from the caller's.
 */
#ifndef AIRLOCK_STDIO_RELAY_H
#define AIRLOCK_STDIO_RELAY_H

#include <stdbool.h>
#include <sys/types.h>

struct stdio_relay {
	int agent[3];   /* the agent's 0-2: a pipe end, or -1 for the caller's own */
	pid_t out_pid;  /* copies the agent's output and errors, or -1 */
	pid_t in_pid;   /* copies the caller's input to the agent, or -1 */
	int out_pidfd;  /* pidfds of the two (close-on-exec), or -1: waited */
	int in_pidfd;   /* on and signalled through these, so that another
			   reaper of the supervisor's children (waitpid(-1))
			   changes nothing */
};

/* Is descriptor @fd one the agent may hold as it is: a terminal or a pipe
 * (a FIFO)? False for a regular file, a socket, a device other than a
 * terminal, and a closed descriptor. */
bool stdio_relay_passes(int fd);

/* Opens /dev/null on whichever of 0-2 is closed (so that no descriptor
 * airlock opens later lands there), gives the agent a pipe for each of
 * 0-2 that stdio_relay_passes() refuses (one pipe when 1 and 2 share an
 * open file description, so that their order is kept), and forks the
 * relay processes that copy them. Call it before any secret or key is in
 * memory: the relays are copies of it. Returns 0, or -1 with a reason in
 * @err (nothing is left running). */
int stdio_relay_start(struct stdio_relay *r, char *err, size_t errlen);

/* Once the sandbox holds its copies of r->agent: closes ours, so that the
 * relay sees the end of the agent's output when the sandbox is gone. */
void stdio_relay_detach(struct stdio_relay *r);

/* After the sandbox has ended: waits until everything the agent wrote has
 * been copied to the caller, then stops copying input. Idempotent. The
 * relays may have been reaped by someone else meanwhile: that is fine. */
void stdio_relay_finish(struct stdio_relay *r);

#endif /* AIRLOCK_STDIO_RELAY_H */
