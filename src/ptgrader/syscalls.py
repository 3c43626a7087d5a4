"""The system calls a grading kernel may not make, compiled by the system's libseccomp.

First an allowlist (:data:`ALLOWED`): the calls an honest grading run of every lab makes, and the everyday calls of
the C library and Python beside them; every other call answers ``ENOSYS``, as a Linux kernel without it does.
Why: rounds 64 to 77 each found one more call that reached shared state (inotify, semaphores, AIO, Landlock, the
futex hash, ``quotactl``'s ``Q_SYNC``, POSIX ACLs, ``name_to_handle_at``), every one of them let through because
the filter allowed whatever it did not name. Then, among the allowed calls, what the list below refuses or
counts, by call or by argument.

A jailed kernel already runs without capabilities, in namespaces of its own, as a uid nobody else
uses. What is left is the Linux kernel's own surface: interfaces that reach state shared with every
other process of the uid or the machine, or large amounts of kernel code that honest notebook code
never needs. Every one of them answers ``EPERM`` to a kernel (and to everything it starts: a seccomp
filter is inherited across fork and exec, and no process can remove it):

- **keyrings** (``add_key``, ``request_key``, ``keyctl``): a key is kept per uid, outlives the
  process that added it, and uids are reused between grading runs (the dedicated uid of the next
  grader, or the instructor's own uid in a user namespace). With these blocked a kernel cannot fill
  or read a keyring, so nothing it leaves there can reach the next run;
- **new namespaces** (``unshare``, ``setns``, and ``clone`` with a ``CLONE_NEW*`` flag): inside a
  new user namespace a process is root again, and the Linux kernel code that opens up to such a
  root is where most privilege escalations of recent years were found. ``clone3`` passes its flags
  in memory, where a filter cannot read them, so it answers ``ENOSYS``: the C library then falls
  back to ``clone``, whose flags the filter checks (Docker's default profile does the same);
- **other processes** (``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``kcmp``): a
  kernel has no business with any process but its own; the PID namespace already hides the grader,
  and these close the door for what a kernel starts itself, too;
- **code in the Linux kernel** (``bpf``, ``perf_event_open``, ``userfaultfd``, the ``init_module``
  family, ``kexec_*``, ``io_uring_*``): the usual way in for a kernel exploit. ``torch.profiler``
  (lab 05) profiles CPU operators without ``perf_event_open``, which the tests check;
- **mounts** (``mount``, ``umount2``, ``pivot_root`` and the new mount API): the jail's file system
  is built before the filter is loaded and must stay as built;
- **the cores it was given** (``sched_setaffinity``): ``python -m ptgrader.autograde --jobs N`` gives
  each job its share of the cores, and a kernel that took them all back could slow the students graded
  beside it (their timing checks included) with a hundred busy threads. ``setsid`` too: where Linux gives each
  session a CPU share of its own (autogroups) and no control group holds the kernel (a regular user's grading),
  140 processes each in a session of its own took 140 shares, and another program of the machine kept a
  twentieth of its CPU for a minute (round 78); the jail makes the kernel's one session before the filter.
- **sockets other than local ones** (``socket`` and ``socketpair`` answer ``EAFNOSUPPORT``, as a Linux
  kernel without that family does, to every family but ``AF_UNIX`` and ``AF_NETLINK``): no lab needs a
  network, and every other family reaches past the kernel's own namespaces or its limits. Round 33 bound
  and listened on an ``AF_VSOCK`` socket, which no network namespace holds: open to the virtual
  machine's host and, where a vsock loopback is loaded, to every kernel graded beside it. Round 35 filled
  TCP connections on the namespace's own loopback device: Linux grows their buffers by itself, to 4 MiB
  each, out of one pool for the whole machine (``net.ipv4.tcp_mem``) that no control group of cgroup v1
  and no rlimit counts, and 430 of them put every TCP socket of the machine under memory pressure (UDP
  draws on such a pool too). An allowlist, not a list of families to refuse, so that a family this
  machine gains later is refused too. Of netlink's protocols only ``NETLINK_ROUTE`` (the C library's
  ``getifaddrs`` and ``if_nameindex``): the others answer ``EPROTONOSUPPORT``, since a request to generic netlink or
  to ``sock_diag`` that names a family the Linux kernel lacks makes it load that family's module, as root, for
  the whole machine, on a kernel with modules (round 77), and a loaded protocol module would outlive the run.
- **memory outside the address space** (``memfd_create``, ``memfd_secret``, ``shmget``, ``msgget``, ``semget``,
  ``landlock_*``, ``prctl(PR_FUTEX_HASH)``, ``setxattr`` and its kin, ``mbind``, and ``setsockopt`` of a socket's
  buffer sizes): an anonymous memory file, or a System V segment, keeps
  its pages after every mapping of it is gone, System V message queues hold up to 500 MB in the Linux
  kernel's memory (32,000 queues of 16 KiB) and semaphore sets about 2 MiB each (round 66: 1,800 sets held
  3.6 GiB, with the kernel's own resident memory at 0.36 GiB), and a socket queues up to its buffer size
  there; none of it counts against ``RLIMIT_AS``. Where the jail makes a control group
  (as root), the group counts it; where it cannot (a regular user), these were the way past every
  per-process limit (round 34: 512 socket pairs with 8 MiB buffers held 8 GiB, against a 7 GiB address
  space). A process's private futex hash (``prctl(PR_FUTEX_HASH)``, Linux 6.16) is the same: up to 1 GiB of
  kernel memory for each process (round 73: 5 processes held 5 GiB). Huge pages (``mmap`` with ``MAP_HUGETLB``,
  ``EPERM``) come from one pool for the whole machine, outside a cgroup v1 group's count: round 79's kernel
  emptied the pool an administrator had set up, and with surplus pages allowed held 7 GiB past its group's
  6 GiB. Memory put in the machine's one merging scanner (``madvise(MADV_MERGEABLE)``,
  ``prctl(PR_SET_MEMORY_MERGE)``, where KSM runs) is refused too: a page another program shares with it could
  be timed. Landlock's rulesets (``landlock_*``) too: kernel memory per rule, about 4.4 MiB a ruleset of
  65,536 port rules, and one process's 512 descriptors held 1.9 GiB (round 72). Extended attributes (``setxattr``,
  ``lsetxattr``, ``fsetxattr``) too: the scratch tmpfs charges a user attribute to its own space, but keeps a
  POSIX ACL (``system.posix_acl_access``, ``..._default``) in kernel memory it charges to nothing, about 128 KiB
  for each file's largest one (round 75: 16,340 folders held 4 GiB, as root too, with the kernel's own resident
  memory at 27 MiB). No lab sets one, and ``shutil``'s copies skip attributes they may not set. A memory
  policy set on part of a shared mapping of a tmpfs file (``mbind``) stays with the file, about 340 bytes of
  kernel memory charged to nothing for each page ruled on, after the mapping is gone (round 80: 21 million
  policies, 7 GiB past a 6 GiB group, in 100 s, as root and as a regular user). The one honest call seen,
  OpenBLAS's request for local memory, is a hint it goes on without; ``set_mempolicy`` (one policy per thread)
  stays. A kernel's files
  live in its scratch tmpfs, whose size is fixed (POSIX shared memory and
  torch's shared tensors included: they are files of ``/dev/shm``), and a socket keeps the system's
  default buffers (``net.core.wmem_default``, about 200 KiB).
- **allowances of the whole machine** (``io_setup``; ``seccomp``, ``prctl(PR_SET_SECCOMP)`` and ``setsockopt`` of
  a socket filter): native AIO contexts count against one limit for every process of every user
  (``fs.aio-max-nr``, 65,536 events); round 66's kernel took all of it in one call, and for the minute it ran no
  other program on the machine could start AIO. Every BPF program, a socket's classic filter and a seccomp filter
  included, is compiled into one allowance of code for the whole machine (``net.core.bpf_jit_limit``), and where
  the JIT is always on, a filter that finds it spent cannot load: round 67's kernel attached 50 KiB filters to
  9,779 sockets, and meanwhile no unprivileged program could load a seccomp filter, the jail of the next kernel
  included. No lab uses native AIO, filters sockets or loads a filter of its own.
- **the host's disk and page cache** (``sync``, ``syncfs``, ``quotactl``, ``quotactl_fd``, ``sync_file_range``, ``fadvise64``,
  ``O_DIRECT`` in ``open``'s, ``openat``'s and ``fcntl(F_SETFL)``'s flags, ``openat2``, whose flags the filter
  cannot read, and ``preadv2``'s and ``pwritev2``'s ``RWF_DONTCACHE``,
  ``madvise(MADV_COLD, MADV_PAGEOUT)``, ``process_madvise``, ``fcntl(F_NOTIFY)``): ``sync`` writes back every file system of the machine, and ``syncfs`` the whole file
  system a descriptor is on, the host's disk for a file of the folders bound read-only in the jail (a read-only
  bind is a read-only view of a writable file system; round 69 flushed 206 MB of other programs' data with one
  ``syncfs`` of ``/usr``). ``quotactl``'s ``Q_SYNC`` needs no privilege and does the same (round 77: 1.7 GB of
  other programs' data written in 40 s through ``quotactl_fd`` on ``/usr``). ``sync_file_range`` and ``posix_fadvise`` act on the host's page cache for such a file
  (``POSIX_FADV_DONTNEED`` evicts what other programs share), and so does ``madvise`` with ``MADV_COLD`` or
  ``MADV_PAGEOUT`` on a mapping of a file the kernel's uid owns (the instructor's venv, graded as a regular user:
  round 71), and ``process_madvise``, which gives any advice through a process's handle (round 72: the same
  page-out, on all 426 file mappings of the kernel), and ``F_NOTIFY`` watches a host folder. ``fsync``
  stays, as torch's checkpoints call it: on a file no one changed it writes no data, though ext4 still asks the
  disk to flush its cache each time (round 77: a loop of them cost another program about 12 % of its writes on
  this machine's virtual disk, against a loop of plain calls). Reads that bypass the page cache come from the
  host's disk each time: round 83's kernel read 107 GB of a host library in 50 s with ``O_DIRECT``, and another
  program's reads of that disk ran 9 to 24 times slower, its ``fsync``'d writes 40 to 300 times; ``RWF_DONTCACHE``
  drops what it read. These answer ``EINVAL`` (``O_DIRECT``, as a file system without it does), ``ENOSYS``
  (``openat2``) and ``EOPNOTSUPP`` (the flags); plain reads go through the cache, where a second read is free.
- **the host's file systems through** ``ioctl``: a file system answers commands of its own on any file of it,
  the host's files bound read-only included, and some need no privilege and no write access: round 74's kernel
  flushed a whole host btrfs file system (``BTRFS_IOC_SYNC``) as ``syncfs`` did. So ``ioctl`` is an allowlist
  by the command's type (its second byte): terminals' and descriptors' (``'T'``: ``TCGETS``, ``FIONBIO``,
  ``FIOCLEX``) and, of the sockets' (``0x89``), the commands that read an interface (``SIOCGIFFLAGS``, in the
  kernel's own network namespace), all an honest grading run was seen to use (others of the sockets' type load
  modules: round 78, :data:`SOCKET_IOCTLS`); every other type answers ``ENOTTY``, as a file that knows no such command does.
  A kernel that grades on an accelerator may also use its driver's (:data:`ACCELERATOR_IOCTL_TYPES`).
- **counters of the uid outside the jail** (``inotify_*``, ``fanotify_*``, ``mq_open``): Linux charges a user
  namespace's inotify instances and watches, fanotify groups and POSIX message-queue bytes to the uid that made
  the namespace, against limits set for the whole machine (``fs.inotify.max_user_instances``, 128 here), which
  no rlimit of the kernel's lowers. A regular user's kernels run in a namespace that user made, so round 64's
  kernel held all 128 inotify instances of the instructor's uid for its run, and every other program of theirs
  (an editor's or Jupyter's file watcher, ``tail -f``) failed to make one. No lab watches files or queues
  messages. Queued signals and POSIX timers are charged the same way: the jail caps them with a small
  ``RLIMIT_SIGPENDING`` (:func:`ptgrader.kernels.default_limits`). epoll watches and pipes are charged to the uid
  itself (``fs.epoll.max_user_watches``, ``fs.pipe-user-pages-soft``), and a kernel's own event loop needs a few
  of each, so they are counted, not refused: each ``epoll_ctl(EPOLL_CTL_ADD)``, ``pipe`` and ``pipe2`` notifies
  the kernel's keeper, which lets the kernel's budget through (:data:`ptgrader.jail.BUDGETS`) and answers as Linux
  does past an allowance after that (round 65's kernel, with the code policy off, held every epoll watch of the
  instructor's uid, and their zmq programs, Jupyter's included, stopped). Record locks (``fcntl``'s ``F_SETLK``
  family), memory no rlimit counts, are counted the same way (round 68: 2.1 GiB of them in 40 s), and so are
  shared mappings (``mmap`` of a file, or anonymous and shared), each an open file of the machine's one table
  (``fs.file-max``) that outlives its descriptor (round 70: 240,000 in under a second), and local sockets and
  connections, whose buffers no rlimit counts either (round 71: unaccepted connections held 2.7 GiB). A pipe keeps its default size:
  ``fcntl(F_SETPIPE_SZ)`` answers ``EPERM``; and no pipe is made past the count, as a FIFO (``mknod``, ``mknodat``:
  round 66 opened 1,600 FIFOs). Descriptors in flight over a local socket are counted per uid too, against the
  sender's open-file limit: a kernel's is half the usual 1,024 (:func:`ptgrader.kernels.default_limits`). Leases
  (``fcntl(F_SETLEASE)``) answer ``EPERM``: as a regular user's kernel, a lease on one of their files, bound
  read-only in the jail, would make their own programs wait up to 45 s to write it.

Every system call newer than this list was written against (:data:`REVIEWED_UP_TO`), and every number the
installed libseccomp cannot name, answers ``ENOSYS``, as a Linux kernel without that call does: the filter allows
by default, and without this a call the list has never seen would be allowed, whatever it does. Round 75 found
``open_tree_attr`` (part of the new mount API, Linux 6.15), ``listmount`` and ``file_getattr`` reaching a
6.18 kernel, because the libseccomp of the machine knew nothing past ``futex_requeue``. No honest notebook, nor
the C library, needs a call that new: each comes with a fallback.

Two allowed calls take an argument that chooses among many operations: ``prctl``'s option and ``madvise``'s
advice. Both are allowlists too (:data:`PRCTL_OPTIONS`, :data:`MADVICE`): the options and advice an honest run
gives, and their everyday kin; every other value answers ``EINVAL``, as a Linux kernel that does not know it
does, and those refused above keep their ``EPERM``. Why: rounds 78 to 80 found harm inside allowed calls through
their arguments (``ioctl`` commands, ``mmap``'s huge pages, ``madvise`` and ``prctl`` feeding the merging
scanner), and what is left of these two was never reviewed value by value. Among them: a core-scheduling cookie
(``PR_SCHED_CORE``), which keeps every task without it off the kernel's sibling hardware threads while it runs,
where Linux schedules cores that way; a name for each mapping (``PR_SET_VMA``); a huge page assembled on
demand (``MADV_COLLAPSE``), which may compact memory for the whole machine; guard pages (``MADV_GUARD_INSTALL``).
The whole of an honest grading run of every lab (the grader and its kernels, traced with strace) gave only
``PR_SET_NAME``, ``PR_GET_NAME``, ``PR_SET_PDEATHSIG``, ``PR_CAPBSET_READ``, ``PR_SET_NO_NEW_PRIVS``,
``PR_CAP_AMBIENT`` and ``MADV_DONTNEED``.

``setrlimit`` and ``prlimit64`` may not change the core limit (``EPERM``): the jail sets it to 1 byte, the one
value at which Linux never pipes a crash to the machine's handler (apport, systemd-coredump), which runs as root
outside the jail; lowered to 0, the limit Linux ignores for a pipe, a crash would start it again (round 84).

The filter is compiled here, in the grader, where the Python binding ``pyseccomp`` (over Debian's
``libseccomp2``) is installed, into a classic BPF program that :mod:`ptgrader.jail` loads with one
``prctl`` in the kernel's process, after its namespaces are made and before any code of the
notebook runs: the jail itself stays on the standard library, and each kernel pays nothing for it.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import tempfile

from . import jail

#: The highest system call number this module's lists were reviewed against: ``futex_requeue`` (456, Linux 6.7,
#: numbered alike on every architecture from 424 on). Every higher number answers ENOSYS (see the docstring).
REVIEWED_UP_TO = 456
#: The classic BPF instructions of the check that puts a prologue before libseccomp's program (struct sock_filter:
#: code, jump if true, jump if false, constant); seccomp_data holds the call's number at offset 0.
BPF_LD_W_ABS, BPF_JGT_K, BPF_RET_K = 0x20, 0x25, 0x06
SECCOMP_RET_ERRNO = 0x0005_0000
#: The calls a kernel may make at all: those an honest grading run of every lab was seen to make (strace, 2026-12-06,
#: less the jail's own set-up, done before the filter), and the rest of the everyday file, memory, process, signal,
#: time, event and socket calls of the C library and Python. Every other call it knows answers ENOSYS, as a Linux
#: kernel without that call does, so that a library falls back where it can (see the module's docstring). The calls
#: with rules on their arguments below are allowed where no rule refuses them.
ALLOWED = frozenset({
    # files and folders
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "open", "openat", "creat", "close", "close_range", "lseek", "dup", "dup2", "dup3",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "readlink", "readlinkat",
    "chmod", "fchmod", "fchmodat", "chown", "fchown", "fchownat", "lchown", "umask", "truncate", "ftruncate",
    "fallocate", "fsync", "fdatasync", "flock", "utime", "utimes", "utimensat", "futimesat", "sendfile",
    "copy_file_range", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    # memory
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mincore", "mlock", "mlock2", "munlock",
    "mlockall", "munlockall", "get_mempolicy", "set_mempolicy", "membarrier",
    # processes and threads
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
    "kill", "tgkill", "tkill", "getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid", "getsid",
    "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv", "arch_prctl", "prctl",
    "sched_yield", "sched_getaffinity", "sched_getparam", "sched_setparam", "sched_getscheduler",
    "sched_setscheduler", "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
    "sched_getattr", "sched_setattr", "getpriority", "setpriority", "getrlimit", "setrlimit", "prlimit64",
    "getrusage", "times", "sysinfo", "uname", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "capget", "pidfd_open", "pidfd_send_signal", "getcpu", "restart_syscall",
    # signals and time
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "pause", "alarm", "setitimer", "getitimer",
    "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete", "signalfd", "signalfd4",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "timerfd_create", "timerfd_settime", "timerfd_gettime",
    # waiting on events
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
    # sockets (the families and options are ruled on below)
    "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "shutdown", "getsockname",
    "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "setsockopt", "getsockopt",
    # the rest
    "ioctl", "fcntl", "getrandom",
})
#: Calls that answer EPERM, grouped as the docstring explains.
BLOCKED = (
    "add_key", "request_key", "keyctl",
    "unshare", "setns",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "bpf", "perf_event_open", "userfaultfd", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr",
    "sched_setaffinity",
    "memfd_create", "memfd_secret", "shmget", "msgget", "semget",
    "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark", "mq_open",
    "io_setup", "mknod", "mknodat", "seccomp", "sync", "syncfs", "sync_file_range", "fadvise64", "process_madvise",
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
    "setxattr", "lsetxattr", "fsetxattr", "mbind",
    "quotactl", "quotactl_fd",
    "setsid",
)
#: Socket families a kernel may open: local ones, held by its own namespaces, whose buffers keep the system's
#: default size; every other family answers EAFNOSUPPORT (see the module's docstring).
SOCKET_FAMILIES = (socket.AF_UNIX, socket.AF_NETLINK)
NETLINK_ROUTE = 0  # the one netlink protocol a kernel may open (see the module's docstring)
#: ``setsockopt`` options (all of level SOL_SOCKET) that answer EPERM: those that set a socket's buffer sizes, and
#: those that attach a BPF program to it (compiled into the machine's one allowance for BPF code, see the docstring).
BUFFER_OPTIONS = (socket.SO_SNDBUF, socket.SO_RCVBUF, 32, 33)  # 32, 33: SO_SNDBUFFORCE, SO_RCVBUFFORCE
FILTER_OPTIONS = (26, 50, 51, 52)  # SO_ATTACH_FILTER, SO_ATTACH_BPF, SO_ATTACH_REUSEPORT_CBPF and _EBPF
PR_SET_SECCOMP = 22  # prctl's way to load a seccomp filter (the seccomp call is refused outright)
PR_FUTEX_HASH = 78  # prctl's private futex hash of a process: up to 1 GiB of kernel memory each (see the docstring)
#: The types (second byte) of the ``ioctl`` commands a kernel may send; every other type answers ENOTTY (see the
#: module's docstring): ``'T'``, terminals and descriptors (TCGETS, TIOCGWINSZ, FIONBIO, FIOCLEX); 0x89, sockets.
IOCTL_TYPES = (0x54,)
#: Of the sockets' type (0x89), only the commands that read an interface (SIOCGIFNAME, SIOCGIFCONF, SIOCGIFFLAGS,
#: SIOCGIFADDR, SIOCGIFDSTADDR, SIOCGIFBRDADDR, SIOCGIFNETMASK, SIOCGIFMETRIC, SIOCGIFMTU, SIOCGIFHWADDR,
#: SIOCGIFINDEX): others of the type make Linux load a module, as root, for the whole machine, with no privilege
#: asked (round 78: SIOCGIFBR and SIOCBRADDBR load ``bridge``, SIOCGIFVLAN ``8021q``, 128,000 requests a second).
SOCKET_IOCTLS = (0x8910, 0x8912, 0x8913, 0x8915, 0x8917, 0x8919, 0x891B, 0x891D, 0x8921, 0x8927, 0x8933)
SOCKET_IOCTL_TYPE = 0x89
#: And on an accelerator: NVIDIA's (``'F'`` on /dev/nvidiactl and /dev/nvidiaN; its unified memory driver's
#: commands are plain numbers, of type 0), AMD's (``'K'``, /dev/kfd) and the graphics devices' (``'d'``, DRM).
ACCELERATOR_IOCTL_TYPES = (0x00, 0x46, 0x4B, 0x64)
IOCTL_TYPE = 0xFF00  # where an ioctl command holds its type
#: The bits of a system call's argument that Linux reads when the argument is a C int.
EPOLL_CTL_ADD = 1  # epoll_ctl's second argument: the one operation that adds a watch
F_SETPIPE_SZ = 1031  # fcntl's command that enlarges a pipe (against the uid's pipe allowance)
F_SETLEASE = 1024  # fcntl's command that takes a lease on a file
F_NOTIFY = 1026  # fcntl's command that watches a folder (dnotify)
F_SETFL = 4  # fcntl's command that sets a descriptor's status flags (O_DIRECT among them)
RLIMIT_CORE = 4  # the core limit's resource number (setrlimit, prlimit64), the same on every Linux architecture
#: ``preadv2`` and ``pwritev2`` flags from ``RWF_DONTCACHE`` (0x80: read or write, then drop the pages read) up:
#: every bit from the eighth answers EOPNOTSUPP, as a flag Linux does not know (see the module's docstring).
RWF_REFUSED_BITS = range(7, 32)
MADV_COLD, MADV_PAGEOUT = 20, 21  # madvise's advice that pushes a mapping's pages, a file's cache included, out
MAP_SHARED, MAP_ANONYMOUS = 0x01, 0x20  # mmap's flags (MAP_SHARED_VALIDATE, 0x03, holds MAP_SHARED's bit)
MAP_HUGETLB = 0x40000  # mmap's flag for pages of the machine's one pool of huge pages
MADV_MERGEABLE, PR_SET_MEMORY_MERGE = 12, 67  # pages put in the machine's one memory-merging scanner (KSM)
#: ``prctl`` options a kernel may use; every other one answers EINVAL, as an option Linux does not know (see the
#: module's docstring): the parent-death signal, dumpable, keep-capabilities and thread-name flags, the seccomp,
#: capability, securebits and no-new-privileges reads (and the one way of setting those that only drops), the
#: timer slack, the child subreaper, the tid address, the THP switch and the speculation-control read.
PRCTL_OPTIONS = (1, 2, 3, 4, 7, 15, 16, 21, 23, 27, 29, 30, 36, 37, 38, 39, 40, 41, 42, 47, 52)
#: ``madvise`` advice a kernel may give; every other one answers EINVAL (see the module's docstring): the access
#: patterns, freeing and removing pages, fork and core-dump behaviour, transparent huge pages on or off, and
#: populating a mapping.
MADVICE = (0, 1, 2, 3, 4, 8, 9, 10, 11, 14, 15, 16, 17, 18, 19, 22, 23, 24)
RECORD_LOCKS = (6, 7, 37, 38)  # fcntl's commands that set a record lock: F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW
INT_BITS = 0xFFFF_FFFF
#: ``clone`` flags that make a namespace (CLONE_NEWTIME is not among them: for ``clone`` that bit is CSIGNAL's).
NAMESPACE_FLAGS = (jail.CLONE_NEWNS, jail.CLONE_NEWCGROUP, jail.CLONE_NEWUTS, jail.CLONE_NEWIPC, jail.CLONE_NEWUSER,
                   jail.CLONE_NEWPID, jail.CLONE_NEWNET)


def unavailable() -> str:
    """Why no filter can be compiled here ("" when it can): the binding or the library is missing."""
    try:
        import pyseccomp  # noqa: F401  (loads libseccomp.so.2 as it is imported)
    except (ImportError, RuntimeError, OSError) as problem:
        return (f"the system call filter needs libseccomp (Debian and Ubuntu: apt-get install libseccomp2) and"
                f" the Python package pyseccomp (in requirements.txt): {problem}")
    return ""


@functools.cache
def compile_filter(accelerators: bool = False) -> bytes:
    """The kernel's filter as a classic BPF program (``struct sock_filter`` records) for this machine; with
    ``accelerators``, for a kernel given the machine's GPU devices (their drivers' ``ioctl`` commands allowed).

    Needs pyseccomp (see :func:`unavailable`); :func:`ptgrader.jail.kernel_filter` is the jail's way in.
    """
    import pyseccomp

    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    rules.set_attr(pyseccomp.Attr.CTL_OPTIMIZE, 2)  # a binary tree of the calls, not a list: every call is checked
    for name in BLOCKED:
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    for number in _named_numbers():
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, number).decode() not in ALLOWED.union(BLOCKED):
            rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), number)
    for flag in NAMESPACE_FLAGS:  # clone's first argument holds its flags on x86_64 and aarch64 alike
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.add_rule(pyseccomp.NOTIFY, "epoll_ctl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, INT_BITS, EPOLL_CTL_ADD))
    for call in ("pipe", "pipe2", "connect"):
        rules.add_rule(pyseccomp.NOTIFY, call)
    for command in RECORD_LOCKS:
        rules.add_rule(pyseccomp.NOTIFY, "fcntl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, INT_BITS, command))
    # mmap(addr, length, prot, flags, fd, offset): a file's mapping (no MAP_ANONYMOUS), or an anonymous shared one,
    # counted; one of huge pages refused (the rules must not overlap: where two match, the filter takes either)
    rules.add_rule(pyseccomp.NOTIFY, "mmap", pyseccomp.Arg(3, pyseccomp.MASKED_EQ, MAP_ANONYMOUS | MAP_HUGETLB, 0))
    rules.add_rule(pyseccomp.NOTIFY, "mmap", pyseccomp.Arg(3, pyseccomp.MASKED_EQ,
                                                           MAP_ANONYMOUS | MAP_SHARED | MAP_HUGETLB,
                                                           MAP_ANONYMOUS | MAP_SHARED))
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "mmap", pyseccomp.Arg(3, pyseccomp.MASKED_EQ, MAP_HUGETLB, MAP_HUGETLB))
    refused_advice = (MADV_COLD, MADV_PAGEOUT, MADV_MERGEABLE)
    for advice in refused_advice:  # madvise(addr, length, advice)
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "madvise", pyseccomp.Arg(2, pyseccomp.MASKED_EQ, INT_BITS, advice))
    for mask, value in _int_holes(set(MADVICE + refused_advice)):  # every other advice, those above included
        rules.add_rule(pyseccomp.ERRNO(errno.EINVAL), "madvise", pyseccomp.Arg(2, pyseccomp.MASKED_EQ, mask, value))
    for command in (F_SETPIPE_SZ, F_SETLEASE, F_NOTIFY):
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "fcntl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, INT_BITS, command))
    # reads past the page cache, straight from the host's disk: O_DIRECT, as open's or openat's flags or set later
    rules.add_rule(pyseccomp.ERRNO(errno.EINVAL), "open", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, os.O_DIRECT, os.O_DIRECT))
    rules.add_rule(pyseccomp.ERRNO(errno.EINVAL), "openat",
                   pyseccomp.Arg(2, pyseccomp.MASKED_EQ, os.O_DIRECT, os.O_DIRECT))
    rules.add_rule(pyseccomp.ERRNO(errno.EINVAL), "fcntl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, INT_BITS, F_SETFL),
                   pyseccomp.Arg(2, pyseccomp.MASKED_EQ, os.O_DIRECT, os.O_DIRECT))
    for call in ("preadv2", "pwritev2"):  # (fd, iov, iovcnt, pos_l, pos_h, flags): RWF_DONTCACHE and later flags
        for bit in RWF_REFUSED_BITS:
            rules.add_rule(pyseccomp.ERRNO(errno.EOPNOTSUPP), call, pyseccomp.Arg(5, pyseccomp.MASKED_EQ, 1 << bit, 1 << bit))
    for call in ("socket", "socketpair"):  # the family is the first argument of both
        for family in SOCKET_FAMILIES:  # counted by the keeper (ptgrader.jail.COUNTED); netlink: its route protocol
            only_route = [pyseccomp.Arg(2, pyseccomp.EQ, NETLINK_ROUTE)] if family == socket.AF_NETLINK else []
            rules.add_rule(pyseccomp.NOTIFY, call, pyseccomp.Arg(0, pyseccomp.EQ, family), *only_route)
        for family in _refused_families():
            rules.add_rule(pyseccomp.ERRNO(errno.EAFNOSUPPORT), call, pyseccomp.Arg(0, pyseccomp.EQ, family))
        rules.add_rule(pyseccomp.ERRNO(errno.EAFNOSUPPORT), call,
                       pyseccomp.Arg(0, pyseccomp.GT, max(SOCKET_FAMILIES)))
        rules.add_rule(pyseccomp.ERRNO(errno.EPROTONOSUPPORT), call,  # (family, type, protocol): another protocol
                       pyseccomp.Arg(0, pyseccomp.EQ, socket.AF_NETLINK), pyseccomp.Arg(2, pyseccomp.NE, NETLINK_ROUTE))
    # the core limit stays 1 byte, soft and hard (ptgrader.kernels.default_limits): lowered to 0, Linux would pipe a
    # crash to the machine's handler again (round 84); prlimit64(pid, resource, new, old) only read stays
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "setrlimit", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, INT_BITS, RLIMIT_CORE))
    rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "prlimit64", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, INT_BITS, RLIMIT_CORE),
                   pyseccomp.Arg(2, pyseccomp.NE, 0))
    refused_options = (PR_SET_SECCOMP, PR_FUTEX_HASH, PR_SET_MEMORY_MERGE)
    for option in refused_options:
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "prctl", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, INT_BITS, option))
    for mask, value in _int_holes(set(PRCTL_OPTIONS + refused_options)):  # every other option
        rules.add_rule(pyseccomp.ERRNO(errno.EINVAL), "prctl", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, mask, value))
    for option in BUFFER_OPTIONS + FILTER_OPTIONS:  # setsockopt(fd, level, option, ...): level and option are C ints, so only
        # their low 32 bits are compared (Linux ignores the rest, and a filter that compared all 64 would not)
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "setsockopt",
                       pyseccomp.Arg(1, pyseccomp.MASKED_EQ, INT_BITS, socket.SOL_SOCKET),
                       pyseccomp.Arg(2, pyseccomp.MASKED_EQ, INT_BITS, option))
    for number in _unnamed_numbers():  # holes in the numbering, and calls newer than this libseccomp
        rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), number)
    allowed = IOCTL_TYPES + (SOCKET_IOCTL_TYPE,) + (ACCELERATOR_IOCTL_TYPES if accelerators else ())
    refused = _byte_holes(set(allowed), 8) + _byte_holes({command & 0xFF for command in SOCKET_IOCTLS}, 0,
                                                         SOCKET_IOCTL_TYPE << 8, IOCTL_TYPE)
    for mask, value in refused:  # ioctl(fd, command, ...): the command is a C int
        rules.add_rule(pyseccomp.ERRNO(errno.ENOTTY), "ioctl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, mask, value))
    with tempfile.TemporaryFile() as program:
        rules.export_bpf(program)
        program.seek(0)
        return _newer_calls_refused() + program.read()


def _newer_calls_refused() -> bytes:
    """Three instructions before libseccomp's program: a call numbered above :data:`REVIEWED_UP_TO` answers ENOSYS
    (libseccomp can only name the calls it knows, so it cannot write this comparison itself)."""
    import struct

    return b"".join(struct.pack("=HBBI", *instruction) for instruction in (
        (BPF_LD_W_ABS, 0, 0, 0),  # the call's number
        (BPF_JGT_K, 0, 1, REVIEWED_UP_TO),  # above it: the next instruction; else skip it
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
    ))


def _named_numbers() -> list[int]:
    """The numbers up to :data:`REVIEWED_UP_TO` that the installed libseccomp names for this machine."""
    unnamed = set(_unnamed_numbers())
    return [number for number in range(REVIEWED_UP_TO + 1) if number not in unnamed]


def _unnamed_numbers() -> list[int]:
    """The numbers up to :data:`REVIEWED_UP_TO` that the installed libseccomp cannot name for this machine: gaps in
    the numbering (a call added there later, as ``uretprobe`` was at 335 on x86_64, was never reviewed), and every
    call newer than the library."""
    import pyseccomp

    unnamed = []
    for number in range(REVIEWED_UP_TO + 1):
        try:
            pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, number)
        except ValueError:
            unnamed.append(number)
    return unnamed


def _refused_families() -> list[int]:
    """The family numbers below the largest allowed one that are not allowed (those above it are refused by one
    comparison): a filter compares an argument with one value at a time, so an allowlist is a list of holes."""
    return [family for family in range(max(SOCKET_FAMILIES)) if family not in SOCKET_FAMILIES]


def _byte_holes(allowed: set[int], shift: int, prefix: int = 0, prefix_mask: int = 0) -> list[tuple[int, int]]:
    """(mask, value) pairs that together match every value of one byte (at bit ``shift``, under the bits ``prefix``
    holds in ``prefix_mask``) that is not ``allowed``: a group of sixteen (the byte's first hex digit) with none
    allowed is one pair, each other refused byte one; about forty comparisons instead of 255.

    For ``ioctl``: the command types (:data:`IOCTL_TYPES`), and the commands within the sockets' type
    (:data:`SOCKET_IOCTLS`)."""
    pairs = []
    for group in range(16):
        values = [group << 4 | low for low in range(16)]
        if not any(value in allowed for value in values):
            pairs.append((prefix_mask | 0xF0 << shift, prefix | group << 4 << shift))
        else:
            pairs += [(prefix_mask | 0xFF << shift, prefix | value << shift) for value in values if value not in allowed]
    return pairs


def _int_holes(allowed: set[int]) -> list[tuple[int, int]]:
    """(mask, value) pairs that together match every C int (an argument's low 32 bits) that is not ``allowed``, a
    set of values below 256: one pair for each bit above the first byte (a value with it set), and the first
    byte's holes (:func:`_byte_holes`) among the values with none set. Pairs may match one value twice, so all
    of them must take one action. For ``prctl``'s options and ``madvise``'s advice."""
    assert all(0 <= value < 256 for value in allowed)
    return [(1 << bit, 1 << bit) for bit in range(8, 32)] + _byte_holes(allowed, 0, 0, INT_BITS & ~0xFF)
