/* SPDX-License-Identifier: Apache-2.0
 * h2up.h - an HTTP/1.1 exchange over an h2 upstream: the upstream
 * endpoint takes HTTP/1.1 request bytes and gives HTTP/1.1 answer bytes,
 * one h2 stream per request (see h2up.c).
 */
#ifndef AIRLOCK_H2UP_H
#define AIRLOCK_H2UP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct endpoint;
struct h2up;

/* Makes @e (TLS, ALPN h2 chosen) translate: its reads and writes carry
 * HTTP/1.1 from then on. */
void h2up_attach(struct endpoint *e);
void h2up_free(struct h2up *h);

ssize_t h2up_read(struct endpoint *e, void *buf, size_t len);
ssize_t h2up_write(struct endpoint *e, const void *buf, size_t len);
bool h2up_pending(const struct h2up *h);
/* Writes what the session queued; 0 when all is out, -EAGAIN or -errno. */
int h2up_flush(struct endpoint *e);
uint32_t h2up_events(const struct endpoint *e, bool want_read, bool want_write);

#endif /* AIRLOCK_H2UP_H */
