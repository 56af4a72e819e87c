#!/usr/bin/python3
# own_sockets.py - run inside the sandbox, in the directory to test: the
# agent's own unix sockets work as they do outside (the gate performs its
# connect/sendto/sendmsg/sendmmsg calls). Prints "ok NAME" per check, in
# order, and stops at the first failure (with a traceback on stderr).
import array
import ctypes
import os
import socket
import threading
import time

tag = "own-%d" % os.getpid()


def ok(name):
    print("ok", name, flush=True)


def path(name):
    p = "%s-%s" % (tag, name)
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass
    return p


# stream, by a relative path
p = path("stream")
srv = socket.socket(socket.AF_UNIX)
srv.bind(p)
srv.listen()
c = socket.socket(socket.AF_UNIX)
c.connect(p)
a, _ = srv.accept()
c.sendall(b"hello")
assert a.recv(5) == b"hello"
ok("stream")

p = path("seqpacket")
sp = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
sp.bind(p)
sp.listen()
c2 = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c2.connect(os.path.abspath(p))
a2, _ = sp.accept()
c2.sendmsg([b"packet"])
assert a2.recv(16) == b"packet"
ok("seqpacket")

# datagrams to a socket of our own
p = path("dgram")
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d.bind(p)
e = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
e.sendto(b"one", p)
assert d.recv(16) == b"one"
ok("dgram-sendto")
e.sendmsg([b"tw", b"o"], [], 0, os.path.abspath(p))
assert d.recv(16) == b"two"
ok("dgram-sendmsg")


class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint),
                ("iov", ctypes.POINTER(iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]


libc = ctypes.CDLL(None, use_errno=True)
addr = ctypes.create_string_buffer(b"\x01\x00" + p.encode() + b"\x00")
bufs = [ctypes.create_string_buffer(b"three"), ctypes.create_string_buffer(b"four")]
vec = (mmsghdr * 2)()
iovs = (iovec * 2)()
for i in range(2):
    iovs[i].base = ctypes.cast(bufs[i], ctypes.c_void_p)
    iovs[i].len = len(bufs[i].value)
    vec[i].hdr.name = ctypes.cast(addr, ctypes.c_void_p)
    vec[i].hdr.namelen = len(addr.raw)
    vec[i].hdr.iov = ctypes.pointer(iovs[i])
    vec[i].hdr.iovlen = 1
n = libc.sendmmsg(e.fileno(), vec, 2, 0)
assert n == 2, os.strerror(ctypes.get_errno())
assert (vec[0].len, vec[1].len) == (5, 4)
assert d.recv(16) == b"three" and d.recv(16) == b"four"
ok("dgram-sendmmsg")
e.connect(p)
e.send(b"five")
assert d.recv(16) == b"five"
ok("dgram-connect")

# connect() through /proc/self/fd of an O_PATH descriptor (long paths)
fd = os.open(os.path.join(os.getcwd(), tag + "-stream"), os.O_PATH)
c3 = socket.socket(socket.AF_UNIX)
c3.connect("/proc/self/fd/%d" % fd)
srv.accept()
ok("o_path")

x, y = socket.socketpair()
x.sendall(b"pair")
assert y.recv(4) == b"pair"
ok("socketpair")

r, w = os.pipe()
x.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
msg, anc, _, _ = y.recvmsg(1, socket.CMSG_LEN(4))
passed = array.array("i", anc[0][2])[0]
os.write(passed, b"via-fd")
assert os.read(r, 6) == b"via-fd"
ok("scm-rights")

y.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
x.sendmsg([b"C"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS,
                    array.array("i", [os.getpid(), os.getuid(), os.getgid()]))])
msg, anc, _, _ = y.recvmsg(1, socket.CMSG_SPACE(12))
assert array.array("i", anc[0][2])[0] == os.getpid()
ok("scm-credentials")
try:
    x.sendmsg([b"C"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS,
                        array.array("i", [1, os.getuid(), os.getgid()]))])
    raise AssertionError("a foreign pid was accepted")
except PermissionError:
    ok("spoofed-pid-refused")


def sender_pid(sock):
    msg, anc, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(12))
    return [array.array("i", a[2])[0] for a in anc if a[1] == socket.SCM_CREDENTIALS]


# Without SCM_CREDENTIALS of its own, a receiver with SO_PASSCRED still
# sees the agent's pid (not init's, which performs the call).
x.sendmsg([b"N"])
assert sender_pid(y) == [os.getpid()]
d.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
e2 = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
e2.sendto(b"six", os.path.abspath(tag + "-dgram"))
assert sender_pid(d) == [os.getpid()]
ok("passcred-pid")

name = "\0airlock-" + tag
ab = socket.socket(socket.AF_UNIX)
ab.bind(name)
ab.listen()
c4 = socket.socket(socket.AF_UNIX)
c4.connect(name)
ok("abstract")

# A blocking sendmsg() of more than the gate copies at once sends it all.
data = b"z" * (3 << 20)
got = []


pids = set()


def reader():
    n = 0
    while n < len(data):
        chunk, anc, _, _ = y.recvmsg(1 << 20, socket.CMSG_SPACE(12))
        if not chunk:
            break
        pids.update(array.array("i", a[2])[0] for a in anc)
        n += len(chunk)
    got.append(n)


t = threading.Thread(target=reader)
t.start()
assert x.sendmsg([data]) == len(data)
t.join(10)
assert got == [len(data)]
assert pids == {os.getpid()}, pids
ok("big-sendmsg")

tc = socket.socket()
tc.connect(("127.0.0.1", 3128))
ok("tcp")
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"x", ("127.0.0.1", 9))
ok("udp")

for n in ("stream", "seqpacket", "dgram"):
    os.unlink("%s-%s" % (tag, n))
