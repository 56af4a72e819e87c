/* SPDX-License-Identifier: Apache-2.0
 * usock.h - the unix-socket gate: no pathname unix socket of the host can
 * be reached from the sandbox (docs/UNIX-SOCKETS.md). The agent's seccomp
 * filter turns connect(), sendmsg(), sendmmsg() and sendto() with an
 * address into user notifications; the sandbox's init serves them here,
 * performing each call itself on its own copy of the agent's socket.
 */
#ifndef AIRLOCK_USOCK_H
#define AIRLOCK_USOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* sun_path's size: the longest pathname a unix address holds. */
#define USOCK_PATH_MAX 108

/* --- the listener hand-off, before the agent's exec ----------------------- */

/* The agent's filter hands its listener over just before exec. Once the
 * filter is loaded the agent's own sendmsg() would wait for the gate that
 * has no listener yet, and init may not copy it out with pidfd_getfd()
 * (until exec the agent's memory belongs to the user namespace above the
 * sandbox's). So a thread started before the filter - the one thread it
 * does not cover, gone at exec - sends it to init with SCM_RIGHTS. */
struct usock_handoff {
	unsigned long thread;  /* pthread_t */
	int pipe[2];           /* the listener's number, to the thread */
	int chan;
	int result;
};

/* Agent side, before loading the filter: starts the thread, which will
 * send over @chan (the agent's end of a socket pair with init). Returns 0
 * or -errno (nothing is left running). */
int usock_handoff_start(struct usock_handoff *h, int chan);

/* Agent side, after loading the filter: @listener is the listener, or
 * -errno if loading failed (the thread then ends without sending).
 * Waits for the thread; closes @listener and the thread's pipe. Returns 0
 * once init holds the listener, or -errno: the agent must not exec. */
int usock_handoff_finish(struct usock_handoff *h, int listener);

/* Init side: receives the agent's listener over @chan. Returns it (a new
 * descriptor, close-on-exec), or -EPIPE when the agent ended or failed
 * before sending it (it reports why itself), or another -errno. */
int usock_handoff_receive(int chan);

/* --- the gate, in init ------------------------------------------------------ */

struct usock_gate;

/* A gate serving @listener (taken over: the gate closes it). @rw are the
 * policy's fs.rw paths (absolute, resolved; borrowed for the gate's
 * lifetime): a socket beneath one may be reached whoever bound it. Must
 * be called in the sandbox's network and mount namespaces, with the
 * capabilities init holds there. Returns NULL with a line in @err. */
struct usock_gate *usock_gate_new(int listener, char *const *rw, size_t nrw,
				  char *err, size_t errlen);

/* The descriptor to poll for POLLIN: a notification is waiting. */
int usock_gate_fd(const struct usock_gate *g);

/* Serves one notification: performs the agent's call, or refuses it, and
 * answers. Returns 0, or -errno when the gate can no longer serve (the
 * caller must end the session: the agent's calls would hang). Never
 * blocks on the agent's behalf: a call that must wait runs in a worker
 * process, which the caller reaps and passes to usock_gate_reaped(). */
int usock_gate_serve(struct usock_gate *g);

/* After waitpid() returned @pid with @wstatus: true if it was one of the
 * gate's workers (a worker that died before answering has its call
 * answered EINTR). */
bool usock_gate_reaped(struct usock_gate *g, pid_t pid, int wstatus);

/* --- pure helpers, exposed for the unit tests ---------------------------- */

enum usock_addr_kind {
	USOCK_ADDR_NONE,     /* not AF_UNIX, or no address: the kernel decides */
	USOCK_ADDR_PATH,     /* a pathname: the gate decides */
	USOCK_ADDR_ABSTRACT, /* abstract or autobind: per network namespace */
	USOCK_ADDR_INVALID,  /* an AF_UNIX address the kernel refuses */
	USOCK_ADDR_COUNT
};

const char *usock_addr_kind_to_string(enum usock_addr_kind k);

/* Classifies the @len bytes of @addr as the kernel reads an AF_UNIX
 * address; for USOCK_ADDR_PATH, @path receives the path (NUL-terminated
 * where the kernel would end it). */
enum usock_addr_kind usock_addr_classify(const void *addr, size_t len,
					 char path[USOCK_PATH_MAX + 1]);

/* Rewrites a leading /proc/self/ or /proc/thread-self/ of @path to
 * /proc/@tid/ (the gate must resolve it as the agent's thread would).
 * Returns false if the result does not fit in @outlen. */
bool usock_proc_self_rewrite(const char *path, pid_t tid, char *out, size_t outlen);

/* True if @path is one of @dirs or lies beneath one (whole components). */
bool usock_path_under(const char *path, char *const *dirs, size_t ndirs);

/* Scans one buffer of a NETLINK_SOCK_DIAG unix dump for a socket bound to
 * the file (@kdev: the kernel's dev_t, major << 20 | minor; @ino32: the
 * inode number's low 32 bits, all the dump carries). Returns 1 when found,
 * 0 when the buffer holds no match and more may follow, 2 at the dump's
 * end (3: both), -EPROTO on a malformed buffer, or the dump's -errno. */
int usock_diag_scan(const void *buf, size_t len, uint32_t kdev, uint32_t ino32);

/* The control messages of an agent's sendmsg(), as the gate must treat
 * them. */
#define USOCK_CMSG_FDS_MAX 253 /* the kernel's SCM_MAX_FD */

struct usock_cmsg_scan {
	int fds[USOCK_CMSG_FDS_MAX]; /* SCM_RIGHTS descriptors, in order */
	size_t nfds;
	bool creds;         /* an SCM_CREDENTIALS message is present */
	pid_t creds_pid;    /* ...claiming this pid */
	size_t end;         /* where a message appended would start: after
			     * the last header's padding (CMSG_NXTHDR), at
			     * most CMSG_ALIGN(len) */
};

/* Walks the @len bytes of control data @ctl as the kernel does
 * (CMSG_FIRSTHDR/CMSG_NXTHDR). Returns 0 and fills @out, or -EINVAL for a
 * malformed buffer or more than 253 descriptors (the kernel's limits). */
int usock_cmsg_scan(const void *ctl, size_t len, struct usock_cmsg_scan *out);

/* Replaces the i-th SCM_RIGHTS descriptor of @ctl (as counted by
 * usock_cmsg_scan) by fds[i]; @ctl must have passed usock_cmsg_scan. */
void usock_cmsg_replace_fds(void *ctl, size_t len, const int *fds, size_t nfds);

/* Appends the @cmsglen bytes of control message @cmsg to the @len bytes of
 * control data @ctl that @scan describes, where the kernel's CMSG_NXTHDR
 * finds it (zeroing the padding an unpadded last message lacked; trailing
 * bytes the kernel ignores are overwritten). @ctl must have room for
 * CMSG_ALIGN(@len) + @cmsglen bytes. Returns the new length. */
size_t usock_cmsg_append(void *ctl, size_t len, const struct usock_cmsg_scan *scan,
			 const void *cmsg, size_t cmsglen);

/* Opens a pidfd for thread @tid whose fd table is the thread's own:
 * PIDFD_THREAD where the kernel has it (6.9); with @legacy (or an older
 * kernel) the thread group's pidfd, checked with kcmp() to share the
 * thread's fd table. Returns the pidfd or -errno. */
int usock_thread_pidfd(pid_t tid, bool legacy);

#endif /* AIRLOCK_USOCK_H */
