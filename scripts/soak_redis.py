#!/usr/bin/env python3
"""The seed's on-sale over real HTTP against a real Redis, two room instances (issue #31's soak).

Starts one redis-server on a free loopback port (`SLOWLOG` at `--slowlog-us`, 1,000 µs by default, kept up to
1,000,000 entries), and two `onsale` demos over it (`--redis`, the same data directory for the keys they share,
`--fairness random --capacity 8000 --refresh-seconds 20`, the door shut for an hour), then:

1. Joins `--people` people (600,000) as browsers do, over HTTP with wrk, in chunks of `--chunk`: a protected page
   (`GET /seats`, `Accept: text/html`) without a cookie on each instance (half the chunk each), the session cookie
   of each answer (a ticket) written to a file by the wrk script; then each one's first poll with that cookie
   (`GET /waitroom/status`, on the other instance: the ticket is redeemed, the person is in the pre-queue), the
   cookie it answers written to a file. A ticket is good for the abandon grace (180 s): a chunk takes seconds.
2. Moves the opening (admin API `schedule`) to `--before` seconds from then (or, with `--opens-in`, keeps the one
   the instances started with, counted from their start, as the issue's run did).
3. Polls everyone round robin with wrk through the opening: one wrk per instance from 30 s before the opening
   (`--before`) to 90 s after it (`--after`), the people split across both instances and across wrk's threads, one
   connection per thread (`--connections`, 16 per instance), so each answer belongs to its thread's last request
   and the script times it. The poll script works as the holding page does: it keeps the session cookie each answer
   sets (the draw's number, once), and a person told `admitted` leaves the rotation (its page goes on to the
   shop). The same script, the same connections, before and after the opening, and no pause between rounds. The
   rounds (`--round`, 5 s) are cut at fixed times aligned with the opening; at each cut the script reads Redis's
   `INFO` (total_commands_processed, commandstats, CPU), the demos' CPU time and the room's counters. Per round:
   polls a second (both instances), p50 and p99 latency, Redis commands per poll (background work included, the
   script's own `INFO` calls taken out; commands run by scripts count, as Redis counts them) and of them the
   script calls (`EVALSHA`), the demos' and wrk's CPU per poll (wrk shares the cores: what it spends a poll is taken
   from the room), the times wrk's threads waited for a core or an answer a poll (`voluntary_ctxt_switches`), the
   answers that set a new session cookie (a drawn person's number sealed in), Redis's CPU, people let in, expired and missed (turns that came
   while the person was away, an admission not claimed within the arrival window among them).
4. Reads `SLOWLOG`: the longest command of each phase, and every command over 5 ms, by name (scripts named by
   their SHA1, computed from the script files under `waitroom-layer/src/store/redis/scripts/`).

5. Reports the machine's own stalls: the steal time (`/proc/stat`) and every gap over 4 ms between the wake-ups of a thread on
   each core at SCHED_FIFO 11 (above Redis), and which SLOWLOG entries over 5 ms fall in one of them (they timed the
   core being taken away, not the command).
   For a long command no stall explains: whether redis-server waited on the disk around it (its major page faults,
   and the machine's time with every task stalled on the disk, `/proc/pressure/io`), its minor page faults (pages
   met for the first time: on a machine whose hypervisor takes free memory back each is a fault it serves), and
   whether the wall clock stepped, sampled every 100 ms; for one of 200 ms or more, what each of redis-server's
   threads did meanwhile (time on a core and waiting for one, `/proc/<pid>/task/*/schedstat`, and its state as
   sampled, the main thread's with its kernel wait channel and, in state D, its innermost kernel frames). A
   command whose main thread was sampled in state D for half its length or more timed a wait in the kernel (a lock
   of its memory map held by the machine's memory manager, say), not its own work, and is shown apart.

0. First (`--warm-memory`), as root on a virtual machine that reports its free pages to the host: pauses that
   reporting for the run and touches the machine's available memory once, so that the run meets warm memory as a
   server does after its first minutes, not a host fault on every page it grows into (see `warm_memory`).

Then a table: the rounds before the opening, the 30 s after it, the minute after that, against the targets of
issue #31 (none over 5 ms; polls a second after / before >= 0.9; Redis commands a poll <= 0.05 in the 30 s after,
<= 0.01 in the minute after).
Each window also gives what a poll cost in CPU, the room's (both demos, and Redis) and wrk's, against before: the
two share the two cores. wrk's rises after the draw for a reason of its own (each waiting person's answer is their
own, and wrk's LuaJIT pays for each new body it interns; `scripts/wrk_bodies.py` measures that apart).

`--control` runs everything the same but leaves the opening an hour away: the rounds are cut as if it came, and
"after" is more pre-queue polls. What a control run's after / before comes to is what the machine and the run's
own time do to the figure with no opening at all; run it alternately with plain runs to tell the opening's cost
from the machine's drift (BENCHMARKS.md).

Usage: scripts/soak_redis.py [--people 600000] [--chunk 100000] [--connections 16] [--before 30] [--after 90]
                             [--round 5] [--opens-in SECONDS] [--binary PATH] [--slowlog-us 1000]
                             [--redis-sched fifo|nice|none] [--max-minutes 40] [--count-scripts] [--warm-memory GIB]
                             [--control]
Redis's main thread runs at SCHED_FIFO 10 by default (as root), so that on a shared machine SLOWLOG times the
commands rather than their waits for a core. `--count-scripts` (an investigation, not a measurement: it slows
Redis) logs every command during the rounds and names the script calls of each round.
The demo is built with `cargo build --release --example onsale --features redis` unless --binary names one.
Loopback only. Everything it starts (redis-server, both demos, wrk) is stopped at the end, on an error and on
Ctrl-C; the whole run is bounded by --max-minutes, each wrk run by its own time limit.
"""
import argparse, hashlib, http.client, json, math, os, re, secrets, shutil, signal, socket, statistics, subprocess, sys
import tempfile, threading, time
from collections import namedtuple

sys.dont_write_bytecode = True  # no __pycache__ in the checkout for the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_http import ROOT, WRK_DONE, cpu_seconds, free_port, onsale_binary, start_redis, wait_port, wrk_result  # noqa: E402

# --- the machine's own stalls ----------------------------------------------------------------------------------
# One per core: a thread pinned to it at SCHED_FIFO 11 (above Redis's 10) that wakes every millisecond and writes
# down every gap over STALL_MS between its wake-ups, with when it began. No task here outranks it, so a gap is time
# the core was given to no task here (the hypervisor ran something else, steal, or the kernel did interrupt work),
# and a SLOWLOG entry that falls in one timed the stall, not the command.
STALL_MS = 4
STALL_PY = r'''
import os, sys, time
out = open(sys.argv[2], "w", buffering=1)
os.sched_setaffinity(0, {int(sys.argv[1])})
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(11))
except OSError as e:
    out.write(f"# not at SCHED_FIFO 11: {e}\n")
limit = float(sys.argv[3]) / 1000
prev = time.monotonic()
while True:
    time.sleep(0.001)
    now = time.monotonic()
    if now - prev > limit:
        out.write(f"{time.time() - (now - prev):.3f} {1000 * (now - prev):.1f}\n")
    prev = now
'''


def voluntary_switches(pid):
    """The times the process's threads so far gave up their core to wait (`voluntary_ctxt_switches`, summed)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def read_stalls(paths):
    """(start unix time, ms, core) of every stall the detectors saw, and what went wrong with them (a detector
    that did not run, or not above Redis, says nothing true of the machine)."""
    out, problems = [], []
    for core, path in paths:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("#"):
                        problems.append(f"core {core}{line[1:].rstrip()}")
                        continue
                    t, ms = line.split()
                    out.append((float(t), float(ms), core))
        except (OSError, ValueError) as e:
            problems.append(f"core {core}: {e}")
    return sorted(out), problems


REPORTING_ORDER = "/sys/module/page_reporting/parameters/page_reporting_order"


def pause_reporting():
    """Pauses the guest kernel's reporting of free pages to the host (`page_reporting_order` set past the largest
    order); returns the old value to put back, or None when there is no such knob or it cannot be set."""
    try:
        with open(REPORTING_ORDER) as f:
            old = f.read().strip()
        with open(REPORTING_ORDER, "w") as f:
            f.write("11")
        return old
    except OSError:
        return None


def warm_memory(gib):
    """Touches `gib` GiB of fresh memory, a byte a page, and frees it: (GiB, seconds). With the free page reporting
    paused first (`pause_reporting`), the run then meets warm memory, as a server's is after its first minutes.

    Why: on a virtual machine whose kernel reports free pages back to the host (virtio-balloon free page reporting,
    as on this workplace's machines), every page freed goes back to the host within seconds, and the next touch of
    it is a fault the host serves. Measured here: 6 GiB touched took 9.6 s cold and 2.0 s once warm with reporting
    paused (4 GiB touched 3 s after 4 GiB were freed, reporting on: 6.0 s, cold again); a soak on a cold machine had
    redis-server held in the kernel for 5 s (state D in `vma_prepare`, growing its heap)."""
    import mmap
    size = int(gib * (1 << 30)) // mmap.PAGESIZE * mmap.PAGESIZE
    t0 = time.time()
    if size > 0:
        m = mmap.mmap(-1, size)
        try:
            for i in range(0, size, mmap.PAGESIZE):
                m[i] = 1
        finally:
            m.close()
    return size / (1 << 30), time.time() - t0


def restore_reporting(old):
    if old is not None:
        try:
            with open(REPORTING_ORDER, "w") as f:
                f.write(old)
        except OSError as e:
            print(f"could not put page_reporting_order back to {old}: {e}", file=sys.stderr)


def available_gib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1 << 20)
    return 0.0


def steal_seconds():
    """The machine's steal time so far (all cores, /proc/stat), seconds."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


# One sample of `RedisWaits`: when (wall clock), redis-server's major and minor page faults so far, the machine's
# full disk stall so far (µs), the wall clock's offset from the monotonic one (s), and redis-server's threads.
Sample = namedtuple("Sample", "t majflt minflt io_full_us clock_offset threads")

# The shortest command whose threads' samples say anything (100 ms samples, two inside it).
THREADS_US = 200_000


class RedisWaits(threading.Thread):
    """Every 100 ms: redis-server's major page faults (its own pages read back from disk: `/proc/<pid>/stat`) and
    minor ones, the machine's time with every task stalled on the disk (`/proc/pressure/io`, `full`, µs), the wall
    clock's offset from the monotonic one, and what each of redis-server's threads is doing. A command that waits
    for the disk in the middle (a code or data page of Redis read back) is slow with no CPU taken from it, which the
    stall detector, whose threads never touch the disk, does not see; a step of the wall clock during a command
    (the host setting the machine's time) lengthens the command by the step wherever Redis times it by that clock;
    and a main thread held in the kernel (state D) makes the command as long as the hold."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.done = pid, [], threading.Event()

    @staticmethod
    def io_full_us():
        try:
            with open("/proc/pressure/io") as f:
                for line in f:
                    if line.startswith("full"):
                        return int(line.rsplit("total=", 1)[1])
        except OSError:
            pass
        return 0

    def faults(self):
        """redis-server's major page faults so far, and its minor ones (a page taken for the first time: on a
        machine whose hypervisor takes free memory back, each costs a fault the hypervisor serves)."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
                return int(fields[9]), int(fields[7])
        except (OSError, IndexError, ValueError):
            return 0, 0

    def threads(self):
        """Each of redis-server's threads: (name, state, ns on a core, ns runnable but waiting for one), from
        `/proc/<pid>/task/<tid>/{comm,stat,schedstat}`; the main thread's kernel wait channel as its name's suffix."""
        out = {}
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return out
        for tid in tids:
            base = f"/proc/{self.pid}/task/{tid}"
            try:
                with open(f"{base}/comm") as f:
                    name = f.read().strip()
                with open(f"{base}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                with open(f"{base}/schedstat") as f:
                    run_ns, wait_ns = (int(x) for x in f.read().split()[:2])
                if tid == str(self.pid):
                    with open(f"{base}/wchan") as f:
                        state += ":" + (f.read().strip() or "-")
                    if state.startswith("D"):
                        # Where in the kernel it waits (root only): the innermost frames.
                        try:
                            with open(f"{base}/stack") as f:
                                frames = [l.split()[-1].split("+")[0] for l in f if l.strip()][:5]
                            state += " (" + " < ".join(frames) + ")"
                        except OSError:
                            pass
            except (OSError, ValueError, IndexError):
                continue
            out[tid] = (name, state, run_ns, wait_ns)
        return out

    def run(self):
        while not self.done.wait(0.1):
            majflt, minflt = self.faults()
            self.samples.append(Sample(time.time(), majflt, minflt, self.io_full_us(), time.time() - time.monotonic(),
                                       self.threads()))

    def span(self, start, end):
        """The samples from start to end (wall clock), and the last one before them to count from (or the first
        inside): ([], None) when none falls inside."""
        inside = [x for x in self.samples if start <= x.t < end]
        if not inside:
            return [], None
        before = [x for x in self.samples if x.t < start]
        return inside, before[-1] if before else inside[0]

    def threads_during(self, start, end):
        """redis-server's threads from start to end (wall clock): per thread, its name, the ms it ran, the ms it
        waited for a core while runnable, and its states as sampled (the main thread's with its wait channel)."""
        inside, first = self.span(start, end)
        rows = []
        for tid, (name, _, run0, wait0) in (first.threads.items() if first else ()):
            last = inside[-1].threads.get(tid)
            if not last:
                continue
            states = {}
            for x in inside:
                st = x.threads.get(tid)
                if st:
                    states[st[1]] = states.get(st[1], 0) + 1
            rows.append((name, (last[2] - run0) / 1e6, (last[3] - wait0) / 1e6, states))
        return rows

    def around(self, t):
        """Redis's major faults, the machine's full disk stall (ms), the wall clock's steps (ms, summed) and Redis's
        minor faults from second t - 1 to the end of second t + 1."""
        inside, first = self.span(t - 1, t + 2)
        if not first:
            return 0, 0.0, 0.0, 0
        last = inside[-1]
        return (last.majflt - first.majflt, (last.io_full_us - first.io_full_us) / 1000,
                (last.clock_offset - first.clock_offset) * 1000, last.minflt - first.minflt)

    def clock_steps(self):
        """The wall clock's steps over 2 ms between two samples: (when, ms)."""
        return [(b.t, (b.clock_offset - a.clock_offset) * 1000) for a, b in zip(self.samples, self.samples[1:])
                if abs(b.clock_offset - a.clock_offset) > 0.002]


# --- wrk scripts ------------------------------------------------------------------------------------------------
# Shared by the three: the session cookie (`name=value`) an answer sets, and the session id in a cookie.
LUA_COMMON = r"""
local function session_pair(headers)
  local v = headers["set-cookie"] or headers["Set-Cookie"]
  if v then return v:match("^([^=;]*waitroom_session=[^;]+)") end
end
local function id_of(pair) return pair:match("=([^.]+)%.") end
local function state_of(headers) return headers["waitroom-state"] or headers["Waitroom-State"] end
local function finish(path, ...)
  local f = assert(io.open(path, "w"))
  f:write(table.concat({...}, " "), "\n")
  f:close()
  wrk.thread:stop()
end
"""

# First contacts: a protected page without a cookie, as a browser's first visit; each answer's ticket cookie to a
# file, until `target` are written (then a marker file, and the thread stops; the script stops wrk).
LUA_JOIN = LUA_COMMON + r"""
local target, out, done_path
local got, failed = 0, 0
local page = { ["Accept"] = "text/html" }
init = function(args)
  target = tonumber(args[1])
  out = assert(io.open(args[2], "w"))
  done_path = args[3]
end
request = function()
  if got < target then return wrk.format("GET", "/seats", page) end
  return wrk.format("GET", "/healthz")
end
response = function(status, headers, body)
  if got >= target or not state_of(headers) then return end
  local c = session_pair(headers)
  if c then
    out:write(c, "\n")
    got = got + 1
  else
    failed = failed + 1
  end
  if got >= target or failed > target then
    out:close()
    finish(done_path, got, failed)
  end
end
"""

# The holding page's first poll with its ticket: the ticket is redeemed; the cookie the answer sets to a file, once
# per person (a person polled twice, as the list wraps, is written once). A join close to the opening is written at
# once and its cookie is no ticket (its mark has no `t`): that cookie stands, and is written as it is polled.
LUA_FIRST_POLL = LUA_COMMON + r"""
local cookies, n, i = {}, 0, 0
local out, done_path
local seen, answered, bare = {}, 0, 0
init = function(args)
  for line in io.lines(args[1]) do n = n + 1; cookies[n] = line end
  out = assert(io.open(args[2], "w"))
  done_path = args[3]
end
local function keep(c)
  local id = id_of(c)
  if id and not seen[id] then
    seen[id] = true
    answered = answered + 1
    out:write(c, "\n")
  end
  if answered == n then
    out:close()
    finish(done_path, answered, bare)
  end
end
request = function()
  i = i % n + 1
  local c = cookies[i]
  if answered < n and not c:match("=[^.]+%.[^.]*t[^.]*%.") then keep(c) end
  return wrk.format("GET", "/waitroom/status", { ["Cookie"] = c, ["Accept"] = "application/json" })
end
response = function(status, headers, body)
  if answered >= n then return end
  local c = session_pair(headers)
  if c then keep(c) else bare = bare + 1 end
end
"""

# The rounds' polls: one wrk per instance for the whole polling phase, one connection per wrk thread (so each
# answer belongs to the thread's last request: its latency is timed here, on CLOCK_REALTIME, the clock the rounds
# are cut by). Each thread polls its own share of the people round robin, keeps the session cookie each answer sets
# (the draw's number, once), and drops a person told `admitted` (its page goes on to the shop). Each person's request
# is formatted once and again only when their cookie changes, and an answer is matched to its person by the thread's
# last request (no parsing of ids): the load generator shares the two cores, so what it spends a poll is taken from
# the room. The requests are kept in one C buffer (`SLOT` bytes a person), not as Lua strings: wrk hands every
# answer's body to `response` as a Lua string, which LuaJIT interns, and a waiting person's answer is their own, so
# after the draw each answer is a new string that walks a hash chain of the ones before it (LuaJIT's hash samples
# four places of a string this long; `scripts/wrk_bodies.py`). With tens of thousands of people's strings on its
# heap, the collector came round seldom and those chains grew; with the heap small and the collector's pause at 120,
# it sweeps the answers soon. The same script before and after the opening. Each thread writes a
# line per round: `round polls non2xx resealed bin:count,...` (resealed: answers that set a new session cookie;
# latency bins of 4%).
LUA_POLL = LUA_COMMON + r"""
local ffi = require("ffi")
ffi.cdef[[ typedef struct { long tv_sec; long tv_nsec; } soak_timespec; int clock_gettime(int, soak_timespec *); ]]
local ts = ffi.new("soak_timespec")
local function now() ffi.C.clock_gettime(0, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
local threads = 0
setup = function(thread) thread:set("slot", threads); threads = threads + 1 end

local SLOT = 384
local reqs, lens, n, i, last = nil, nil, 0, 0, 0
local stats, t0, len, sent_at
local cur, count, bad, bins, resealed = nil, 0, 0, {}, 0
local STEP = math.log(1.04)
-- Person k's request (1-based), for their cookie, into their slot.
local function put(k, cookie)
  local r = wrk.format("GET", "/waitroom/status", { ["Cookie"] = cookie, ["Accept"] = "application/json" })
  assert(#r <= SLOT, "a request longer than its slot")
  ffi.copy(reqs + (k - 1) * SLOT, r, #r)
  lens[k - 1] = #r
end
init = function(args)
  local cookies = {}
  for line in io.lines(args[1] .. "-" .. slot) do cookies[#cookies + 1] = line end
  n = #cookies
  reqs = ffi.new("char[?]", math.max(n, 1) * SLOT)
  lens = ffi.new("int32_t[?]", math.max(n, 1))
  for k = 1, n do put(k, cookies[k]) end
  cookies = nil
  collectgarbage()
  collectgarbage("setpause", 120)
  stats = assert(io.open(args[2] .. "-" .. slot, "w"))
  t0, len = tonumber(args[3]), tonumber(args[4])
end
local function flush()
  if cur and count > 0 then
    local parts = {}
    for b, c in pairs(bins) do parts[#parts + 1] = b .. ":" .. c end
    stats:write(cur, " ", count, " ", bad, " ", resealed, " ", table.concat(parts, ","), "\n")
    stats:flush()
  end
  count, bad, bins, resealed = 0, 0, {}, 0
end
request = function()
  sent_at = now()
  if n == 0 then
    last = 0
    return wrk.format("GET", "/healthz")
  end
  i = i % n + 1
  last = i
  return ffi.string(reqs + (i - 1) * SLOT, lens[i - 1])
end
response = function(status, headers, body)
  local t = now()
  local r = math.floor((t - t0) / len)
  if r ~= cur then flush(); cur = r end
  local us = (t - sent_at) * 1e6
  local b = us < 1 and 0 or math.floor(math.log(us) / STEP)
  bins[b] = (bins[b] or 0) + 1
  count = count + 1
  if status >= 400 then bad = bad + 1 end
  if last == 0 then return end
  local v = headers["set-cookie"] or headers["Set-Cookie"]
  if not v then return end
  -- The answer is the last request's (one connection a thread): that person is let in, or has a new cookie.
  if state_of(headers) == "admitted" then
    -- Out of the rotation: the last person takes the slot (no table of people gone to look up on every
    -- request, which costs this script more once people start leaving, after the opening, than before).
    if last ~= n then
      ffi.copy(reqs + (last - 1) * SLOT, reqs + (n - 1) * SLOT, lens[n - 1])
      lens[last - 1] = lens[n - 1]
    end
    n = n - 1
    if i > n then i = 0 end
    return
  end
  local c = session_pair(headers)
  if c then
    put(last, c)
    resealed = resealed + 1
  end
end
"""

LOG_STEP = math.log(1.04)


def percentile(bins, q):
    """The q-th percentile (µs) of merged latency bins (the bin's upper end)."""
    total = sum(bins.values())
    if not total:
        return 0.0
    seen = 0
    for b in sorted(bins):
        seen += bins[b]
        if seen >= q / 100 * total:
            return math.exp((b + 1) * LOG_STEP)
    return math.exp((max(bins) + 1) * LOG_STEP)


# --- Redis ------------------------------------------------------------------------------------------------------
class Resp:
    """A minimal RESP client on one connection (INFO, SLOWLOG, CONFIG): each call counts one command."""

    # Redis held in the kernel (see the module docs) has not answered for over 10 s on this kind of machine: a
    # call waits up to a minute, and each answer that took a second or more is written down (`late`).
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), 60)
        self.calls = 0
        self.late = []
        self.f = self.sock.makefile("rb")

    def call(self, *args):
        self.calls += 1
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = str(a).encode()
            out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
        t = time.time()
        self.sock.sendall(b"".join(out))
        reply = self.read()
        if time.time() - t >= 1:
            self.late.append((t, time.time() - t, str(args[0])))
        return reply

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def info(self, section):
        return dict(l.split(":", 1) for l in self.call("INFO", section).splitlines() if ":" in l and not l.startswith("#"))

    def close(self):
        self.sock.close()


def command_stats(r):
    """Calls so far per command, and the microseconds Redis spent in them (`INFO commandstats`; a script's
    `EVALSHA` counts the whole script, the commands it runs are counted again under their own names)."""
    calls, usec = {}, {}
    for k, v in r.info("commandstats").items():
        m, u = re.search(r"calls=(\d+)", v), re.search(r"usec=(\d+)", v)
        if m:
            calls[k.removeprefix("cmdstat_")] = int(m.group(1))
        if u:
            usec[k.removeprefix("cmdstat_")] = int(u.group(1))
    return calls, usec


def script_names():
    """SHA1 -> name of every store script, assembled as `scripts.rs` does (keys, the finish, the prelude, the body)."""
    d = os.path.join(ROOT, "waitroom-layer", "src", "store", "redis", "scripts")
    try:
        read = lambda p: open(p, encoding="utf-8").read()
        keys, prelude = read(os.path.join(d, "keys.lua")), read(os.path.join(d, "prelude.lua"))
        m = re.search(r'pub const FINISH_LUA: &str = r#"(.*?)"#;', read(os.path.join(ROOT, "waitroom-verify", "src", "redis", "mod.rs")), re.S)
        names = {}
        for f in os.listdir(d):
            if f.endswith(".lua") and f not in ("keys.lua", "prelude.lua") and m:
                code = f"{keys}{m.group(1)}\n\n{prelude}\n\n{read(os.path.join(d, f))}"
                names[hashlib.sha1(code.encode()).hexdigest()] = f.removesuffix(".lua").upper()
        return names
    except OSError:
        return {}


def command_name(entry, shas):
    """A SLOWLOG entry's command, a script call named by its script."""
    a = entry[3] or ["?"]
    cmd = str(a[0]).upper()
    if cmd == "EVALSHA" and len(a) > 1:
        return f"EVALSHA {shas.get(str(a[1]), str(a[1])[:8])}"
    return cmd


# --- the demos --------------------------------------------------------------------------------------------------
def admin(port, token, method, call, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    hdr = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    data = None
    if body is not None:
        hdr["Content-Type"] = "application/json"
        data = json.dumps(body)
    c.request(method, f"/waitroom/admin/{call}", body=data, headers=hdr)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"admin {call} answered {r.status}: {text[:300]}")
    return json.loads(text)


def metrics(port):
    """The instance's own counters from `/waitroom/metrics` (name -> value, first sample of each)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/waitroom/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        m = re.match(r"([a-z_]+)(?:\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m and m.group(1) not in out:
            out[m.group(1)] = float(m.group(2))
    return out


class Run:
    """Everything the soak started, stopped in reverse order at the end."""

    def __init__(self):
        self.procs = []

    def start(self, cmd, **kw):
        p = subprocess.Popen(cmd, **kw)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def wrk_cmd(lua, port, connections, seconds, *args, threads=1):
    return ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "-s", lua, f"http://127.0.0.1:{port}/"] + (["--"] + [str(a) for a in args] if args else [])


def counted(run, jobs, connections, limit):
    """wrk runs (lua, port, args..., done file last) that stop once their script wrote its done file: each is sent
    SIGINT then (wrk prints its summary). Returns (result, seconds until done, the done file's words) per job."""
    t0 = time.time()
    procs = [run.start(wrk_cmd(lua, port, connections, limit, *a), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for lua, port, *a in jobs]
    took = [None] * len(jobs)
    while None in took and time.time() - t0 < limit + 10:
        for k, (p, job) in enumerate(zip(procs, jobs)):
            if took[k] is None:
                if os.path.exists(job[-1]):
                    took[k] = time.time() - t0
                    p.send_signal(signal.SIGINT)
                elif p.poll() is not None:
                    took[k] = time.time() - t0
        time.sleep(0.05)
    out = []
    for k, (p, job) in enumerate(zip(procs, jobs)):
        text = p.communicate(timeout=30)[0]
        if not os.path.exists(job[-1]):
            sys.exit(f"wrk on port {job[1]} did not finish its count within {limit} s:\n{text}")
        with open(job[-1]) as f:
            words = f.read().split()
        out.append((wrk_result(text), took[k], words))
    return out


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--people", type=int, default=600_000)
    ap.add_argument("--chunk", type=int, default=100_000, help="people joined (then polled once) per wrk run pair")
    ap.add_argument("--capacity", type=int, default=8000)
    ap.add_argument("--refresh-seconds", type=int, default=20)
    ap.add_argument("--connections", type=int, default=16,
                    help="wrk connections per instance while polling (one wrk thread each); the joins use as many on one thread")
    ap.add_argument("--round", type=int, default=5, help="seconds a round")
    ap.add_argument("--before", type=int, default=30, help="seconds of rounds before the opening (the opening moved there)")
    ap.add_argument("--after", type=int, default=90, help="seconds of rounds after the opening")
    ap.add_argument("--opens-in", type=int, help="open this many seconds after the demos start instead of moving the opening")
    ap.add_argument("--binary", help="run this onsale build (with the redis feature) instead of building one")
    ap.add_argument("--slowlog-us", type=int, default=1000, help="SLOWLOG threshold (µs)")
    ap.add_argument("--redis-sched", choices=("fifo", "nice", "none"), default="fifo",
                    help="redis-server's main thread at real-time priority (SCHED_FIFO 10), or reniced to -10, so that "
                         "SLOWLOG times the commands rather than the waits for a core on a shared machine (needs root)")
    ap.add_argument("--max-minutes", type=float, default=40, help="the whole run's bound")
    ap.add_argument("--warm-memory", type=float, default=-1,
                    help="GiB of the machine's memory to touch once before the run, with the kernel's free page reporting "
                         "to the host paused for the run (see warm_memory); by default all that is available but 2 GiB; "
                         "0: neither")
    ap.add_argument("--control", action="store_true",
                    help="investigation: the same rounds with the opening left where it is (an hour away), so 'after' "
                         "is more pre-queue polls: what the machine and the run's own time do to the ratio")
    ap.add_argument("--count-scripts", action="store_true",
                    help="investigation: log every command in the rounds (SLOWLOG at 0, read and reset after each round) "
                         "and count the script calls by name each round; slows Redis down a little")
    args = ap.parse_args()
    for tool in ("wrk", "redis-server"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: apt-get install {'redis-server' if tool == 'redis-server' else tool}")
    if args.people < 2 or args.chunk < 2 or args.round < 1:
        sys.exit("--people and --chunk at least 2, --round at least 1")
    if args.control and args.opens_in:
        sys.exit("--control leaves the opening an hour away: not with --opens-in")
    deadline = time.time() + args.max_minutes * 60

    def bound(what):
        if time.time() > deadline:
            sys.exit(f"--max-minutes ({args.max_minutes}) reached during {what}")

    binary = onsale_binary(args.binary, "redis")
    shas = script_names()
    run = Run()
    tmp = tempfile.mkdtemp(prefix="waitroom-soak-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    r = None
    reporting_old = None
    try:
        want = max(0.0, available_gib() - 2) if args.warm_memory < 0 else args.warm_memory
        if want > 0:
            reporting_old = pause_reporting()  # put back in the `finally` below, whatever happens after
        warmed = warm_memory(want)
        load_start = load()
        os.makedirs(os.path.join(tmp, "redis"))
        redis, rport = start_redis("--slowlog-log-slower-than", str(args.slowlog_us), "--slowlog-max-len", "1000000",
                                   rdir=os.path.join(tmp, "redis"))
        run.procs.append(redis)
        niced = ""
        try:
            if args.redis_sched == "fifo":
                os.sched_setscheduler(redis.pid, os.SCHED_FIFO, os.sched_param(10))
                niced = ", redis-server's main thread SCHED_FIFO 10"
            elif args.redis_sched == "nice":
                os.setpriority(os.PRIO_PROCESS, redis.pid, -10)
                niced = ", redis-server reniced to -10"
        except OSError as e:
            niced = f", redis-server's priority left as it was ({e})"
        stall_files = [(c, os.path.join(tmp, f"stalls-{c}.txt")) for c in sorted(os.sched_getaffinity(0))]
        detectors = [run.start([sys.executable, "-c", STALL_PY, str(c), path, str(STALL_MS)]) for c, path in stall_files]
        steal_start, stall_t0 = steal_seconds(), time.time()
        disk = RedisWaits(redis.pid)
        disk.start()
        r = Resp(rport)
        # The admin token: in a file (mode 0600) the demos read, never on a command line.
        token = secrets.token_urlsafe(32)
        token_file = os.path.join(tmp, "admin-token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(f"soak:{token}\n")
        data = os.path.join(tmp, "data")
        ports, demos = [], []
        started = time.time()
        for k in range(2):
            port = free_port()
            cmd = [binary, "--port", str(port), "--redis", f"redis://127.0.0.1:{rport}/", "--data-dir", data,
                   "--capacity", str(args.capacity), "--fairness", "random", "--refresh-seconds", str(args.refresh_seconds),
                   "--opens-in", str(args.opens_in or 3600), "--admin-token-file", token_file, "--metrics"]
            log = open(os.path.join(tmp, f"onsale-{k}.log"), "w")
            demo = run.start(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
            # The first creates the shared key files; the second starts once it listens.
            wait_port(port, demo, f"onsale {k}")
            ports.append(port)
            demos.append(demo)
        pids = [p.pid for p in demos]
        r.call("SLOWLOG", "RESET")
        luas = {}
        for name, text in (("join", LUA_JOIN), ("first", LUA_FIRST_POLL), ("poll", LUA_POLL)):
            luas[name] = os.path.join(tmp, f"{name}.lua")
            with open(luas[name], "w") as f:
                f.write(text + WRK_DONE)
        phases = [("start", time.time())]
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} soak: {args.people:,} people, two onsale instances over one "
              f"Redis ({r.info('server').get('redis_version', '?')}{niced}), random draw, capacity {args.capacity:,}, refresh "
              f"{args.refresh_seconds} s; wrk per instance: joins -t1 -c{args.connections}, polls -t{args.connections} "
              f"-c{args.connections}; commit {commit()}; "
              f"{os.cpu_count()} cores, load average {load_start}; "
              f"{warmed[0]:.1f} GiB of memory warmed first in {warmed[1]:.1f} s"
              + (f", free page reporting to the host paused (page_reporting_order {reporting_old} -> 11, put back after)"
                 if reporting_old is not None else ", free page reporting left as it is")
              + ("; CONTROL: the opening left an hour away, the rounds cut as if it came" if args.control else ""), flush=True)

        # 1. Joins and first polls, in chunks.
        cmds0 = int(r.info("stats")["total_commands_processed"])
        joined, redeemed = [], []
        join_s = first_s = 0.0
        join_res, first_res = [], []
        cmds_join = cmds_first = 0
        done = 0
        chunk_no = 0
        while done < args.people:
            bound("the joins")
            size = min(args.chunk, args.people - done)
            halves = [size // 2, size - size // 2]
            files = [os.path.join(tmp, f"tickets-{chunk_no}-{k}") for k in range(2)]
            c0 = int(r.info("stats")["total_commands_processed"])
            res = counted(run, [(luas["join"], ports[k], halves[k], files[k], files[k] + ".done") for k in range(2) if halves[k]],
                          args.connections, 300)
            c1 = int(r.info("stats")["total_commands_processed"])
            join_s += max(t for _, t, _ in res)
            join_res += [x for x, _, _ in res]
            cmds_join += c1 - c0 - 1
            outs = [os.path.join(tmp, f"redeemed-{chunk_no}-{k}") for k in range(2)]
            # Each ticket's first poll on the other instance.
            res = counted(run, [(luas["first"], ports[1 - k], files[k], outs[k], outs[k] + ".done") for k in range(2) if halves[k]],
                          args.connections, 300)
            c2 = int(r.info("stats")["total_commands_processed"])
            first_s += max(t for _, t, _ in res)
            first_res += [x for x, _, _ in res]
            cmds_first += c2 - c1 - 1
            for k in range(2):
                if halves[k]:
                    with open(outs[k]) as f:
                        redeemed += [l.strip() for l in f if l.strip()]
            done += size
            chunk_no += 1
            print(f"  joined {done:,} ({time.time() - started:.0f} s since the demos started; load average {load()})", flush=True)
        phases.append(("joined", time.time()))
        time.sleep(1)  # the admin's figures are the last snapshot's (a refresh every tick)
        stats = admin(ports[0], token, "GET", "stats")
        joins_total = sum(x["requests"] for x in join_res)
        first_total = sum(x["requests"] for x in first_res)
        print(f"joins: {args.people:,} first contacts (GET /seats without a cookie) in {join_s:.1f} s of wrk ({args.people / join_s:,.0f}/s), "
              f"p99 {max(x['p99'] for x in join_res) / 1000:.1f} ms (worst run); Redis commands per join "
              f"{cmds_join / max(joins_total, 1):.4f}")
        print(f"first polls: {len(redeemed):,} (a ticket redeemed each, or a join already written) in {first_s:.1f} s of wrk ({len(redeemed) / first_s:,.0f}/s), "
              f"p99 {max(x['p99'] for x in first_res) / 1000:.1f} ms; Redis commands per first poll "
              f"{cmds_first / max(first_total, 1):.4f}; the room says {stats['prequeue']:,} in the pre-queue", flush=True)
        if len(redeemed) < args.people:
            print(f"  ({args.people - len(redeemed):,} tickets were not redeemed)")

        # 2. The opening.
        if args.opens_in:
            opens_at = stats["opens_at_ms"] / 1000
        else:
            # wrk's start (3 s) and a round of warm-up before the first round.
            opens_at = time.time() + args.before + 4 + args.round
            if not args.control:
                admin(ports[0], token, "POST", "schedule", {"opens_at": int(opens_at * 1000)})
        phases.append(("scheduled", time.time()))
        if opens_at < time.time() + args.round:
            sys.exit(f"the opening ({opens_at - time.time():.0f} s from now) leaves no round before it: more --opens-in")

        # 3. The rounds: one wrk per instance polling all the time, the rounds cut at fixed times (aligned with the
        # opening); at each cut the Redis and CPU counters are read.
        threads = args.connections
        people = [os.path.join(tmp, f"people-{k}") for k in range(2)]
        marks = [os.path.join(tmp, f"rounds-{k}") for k in range(2)]
        for k in range(2):
            mine = redeemed[k::2]
            for t in range(threads):
                with open(f"{people[k]}-{t}", "w") as f:
                    f.write("\n".join(mine[t::threads]) + "\n")
        # wrk runs a round (and 3 s) before the first round counted: its start (each thread reads its people, opens
        # its connection, and the first rotation through them) is not the room's pace. Counted, the first round ran
        # at 0.78-0.88 of the next five in five of six soaks (2026-12-06), and lifted the after / before figures by
        # 2-3 %.
        n_before = math.floor((opens_at - time.time() - 3 - args.round) / args.round)
        if n_before < 1:
            sys.exit(f"the opening ({opens_at - time.time():.0f} s from now) leaves no round before it: more --opens-in")
        t0 = opens_at - n_before * args.round
        n_after = math.ceil(args.after / args.round)
        seconds = math.ceil(t0 + (n_before + n_after + 1) * args.round + 1 - time.time())
        kept = []  # with --count-scripts: the SLOWLOG entries read so far that are over --slowlog-us

        def slowlog():
            try:
                return r.call("SLOWLOG", "GET", "-1")
            except RuntimeError:
                return r.call("SLOWLOG", "GET", "1000000")

        if args.count_scripts:
            kept += slowlog()
            r.call("SLOWLOG", "RESET")
            r.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        procs = [run.start(wrk_cmd(luas["poll"], ports[k], threads, seconds, people[k], marks[k], t0, args.round, threads=threads),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for k in range(2)]
        cuts = []
        for k in range(n_before + n_after + 1):
            at = t0 + k * args.round
            if k == n_before:
                load_open = load()
                phases.append(("opening", opens_at))
            while time.time() < at:
                time.sleep(min(0.05, max(0.0, at - time.time())))
            bound("the rounds")
            ours = r.calls
            by_command, by_usec = command_stats(r)
            cut = dict(t=time.time(), cmds=int(r.info("stats")["total_commands_processed"]), ours=ours,
                       by_command=by_command, by_usec=by_usec, redis_cpu=sum(float(v) for f, v in r.info("cpu").items()
                                                                   if f in ("used_cpu_sys", "used_cpu_user")),
                       demo_cpu=sum(cpu_seconds(p) for p in pids), wrk_cpu=sum(cpu_seconds(p.pid) for p in procs),
                       wrk_waits=sum(voluntary_switches(p.pid) for p in procs),
                       room=admin(ports[0], token, "GET", "stats")["counters"])
            if args.count_scripts:
                es = slowlog()
                r.call("SLOWLOG", "RESET")
                kept.extend(e for e in es if int(e[2]) >= args.slowlog_us)
                calls, us, plain, plain_us = {}, {}, {}, {}
                for e in es:
                    n = command_name(e, shas)
                    if n.startswith("EVALSHA"):
                        calls[n[8:]] = calls.get(n[8:], 0) + 1
                        us[n[8:]] = us.get(n[8:], 0) + int(e[2])
                    elif n not in ("INFO", "SLOWLOG", "CONFIG"):
                        plain[n] = plain.get(n, 0) + 1
                        plain_us[n] = plain_us.get(n, 0) + int(e[2])
                cut["scripts"] = calls
                cut["scripts_us"] = us
                cut["plain"] = plain
                cut["plain_us"] = plain_us
            cuts.append(cut)
            print(f"  cut {k - n_before:+d} ({at - opens_at:+.0f} s from the opening); load {load()}", flush=True)
        outs = [p.communicate(timeout=seconds + 60)[0] for p in procs]
        totals = [wrk_result(o) for o in outs]
        phases.append(("end", time.time()))
        load_end = load()
        per_round = {}
        for k in range(2):
            for t in range(threads):
                try:
                    f = open(f"{marks[k]}-{t}")
                except OSError:
                    continue
                with f:
                    for line in f:
                        w = line.split()
                        if len(w) < 4:
                            continue
                        x = per_round.setdefault(int(w[0]), dict(polls=0, non2xx=0, resealed=0, bins={}))
                        x["polls"] += int(w[1])
                        x["non2xx"] += int(w[2])
                        x["resealed"] += int(w[3])
                        for pair in (w[4].split(",") if len(w) > 4 else []):
                            b, c = pair.split(":")
                            x["bins"][int(b)] = x["bins"].get(int(b), 0) + int(c)
        rounds = []
        for k in range(n_before + n_after):
            a, b = cuts[k], cuts[k + 1]
            x = per_round.get(k, dict(polls=0, non2xx=0, resealed=0, bins={}))
            span = b["t"] - a["t"]
            cmds = b["cmds"] - a["cmds"] - (b["ours"] - a["ours"])
            polls = x["polls"]
            rounds.append(dict(
                at=a["t"] - opens_at, polls=polls, rps=polls / args.round, p50=percentile(x["bins"], 50),
                p99=percentile(x["bins"], 99), non2xx=x["non2xx"], errors=0, cmds=cmds, per_poll=cmds / max(polls, 1),
                by_command={c: v - a["by_command"].get(c, 0) for c, v in b["by_command"].items() if v > a["by_command"].get(c, 0)},
                by_usec={c: v - a["by_usec"].get(c, 0) for c, v in b["by_usec"].items() if v > a["by_usec"].get(c, 0)},
                cpu_us=(b["demo_cpu"] - a["demo_cpu"]) * 1e6 / max(polls, 1),
                wrk_us=(b["wrk_cpu"] - a["wrk_cpu"]) * 1e6 / max(polls, 1),
                wrk_waits=(b["wrk_waits"] - a["wrk_waits"]) / max(polls, 1), resealed=x["resealed"], redis_cpu=(b["redis_cpu"] - a["redis_cpu"]) / span,
                demo_s=b["demo_cpu"] - a["demo_cpu"], wrk_s=b["wrk_cpu"] - a["wrk_cpu"], redis_s=b["redis_cpu"] - a["redis_cpu"],
                admitted=b["room"]["admitted"] - a["room"]["admitted"], expired=b["room"]["expired"] - a["room"]["expired"],
                missed=b["room"].get("missed", 0) - a["room"].get("missed", 0),
                scripts=b.get("scripts"), scripts_us=b.get("scripts_us") or {},
                plain=b.get("plain") or {}, plain_us=b.get("plain_us") or {}))
        print(f"wrk over the whole polling ({seconds} s, both instances): {sum(x['requests'] for x in totals):,} polls, "
              f"errors {sum(x['errors'] for x in totals)}, non-2xx {sum(x['non2xx'] for x in totals)}")

        # 4. What the run left: SLOWLOG, the room's figures.
        # The script's own INFO, SLOWLOG and CONFIG calls are not the room's.
        slow = [e for e in kept + slowlog() if int(e[2]) >= args.slowlog_us
                and command_name(e, shas) not in ("INFO", "SLOWLOG", "CONFIG")]
        stats = admin(ports[0], token, "GET", "stats")
        kit = [metrics(p) for p in ports]
        stalls, problems = read_stalls(stall_files)
        problems += [f"the detector for core {c} ended early" for (c, _), d in zip(stall_files, detectors) if d.poll() is not None]
        report(args, rounds, slow, shas, phases, stats, kit, load_start, load_open, load_end)
        disk.done.set()
        report_stalls(slow, stalls, problems, steal_seconds() - steal_start, time.time() - stall_t0, shas, len(stall_files),
                      disk)
        if r.late:
            print(f"Redis answered this script late {len(r.late)} times (a second or more): " + ", ".join(
                f"{what} {secs:.1f} s at {time.strftime('%H:%M:%S', time.gmtime(t))}" for t, secs, what in r.late))
    finally:
        # A second Ctrl-C (or SIGTERM) must not cut the cleanup short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if r:
            r.close()
        run.stop_all()
        restore_reporting(reporting_old)
        shutil.rmtree(tmp, ignore_errors=True)


def report(args, rounds, slow, shas, phases, stats, kit, load_start, load_open, load_end):
    before = [x for x in rounds if x["at"] < 0]
    first30 = [x for x in rounds if 0 <= x["at"] < 30]
    minute = [x for x in rounds if 30 <= x["at"] < 90]
    base_rps = statistics.mean(x["rps"] for x in before) if before else float("nan")
    print()
    print(f"| round ({args.round} s, from the opening) | polls/s | vs before | p50 | p99 | non-2xx | Redis commands per poll | "
          "of which script calls | demo CPU per poll | wrk CPU per poll | wrk's waits per poll | new cookies | Redis CPU | let in | expired | missed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rounds:
        print(f"| {x['at']:+.0f} s | {x['rps']:,.0f} | {x['rps'] / base_rps:.2f} | {x['p50'] / 1000:.2f} ms | {x['p99'] / 1000:.2f} ms | "
              f"{x['non2xx']} | {x['per_poll']:.4f} | {x['by_command'].get('evalsha', 0) / max(x['polls'], 1):.4f} | "
              f"{x['cpu_us']:.1f} µs | {x['wrk_us']:.1f} µs | {x['wrk_waits']:.2f} | {x['resealed']:,} | {100 * x['redis_cpu']:.0f}% | {x['admitted']:,} | {x['expired']:,} | {x['missed']:,} |")
    if any(x.get("scripts") for x in rounds):
        print()
        for x in rounds:
            print(f"script calls in the round at {x['at']:+.0f} s (and Redis's time in them, as SLOWLOG timed them): " + ", ".join(
                f"{k} {v:,} ({x['scripts_us'].get(k, 0) / 1000:,.0f} ms)"
                for k, v in sorted((x["scripts"] or {}).items(), key=lambda kv: -kv[1]))
                  + "; other commands (the busiest five by time): " + ", ".join(
                f"{k} {x['plain'][k]:,} ({v / 1000:,.0f} ms)"
                for k, v in sorted(x["plain_us"].items(), key=lambda kv: -kv[1])[:5]))
    print()
    # What a poll cost in CPU over a window, split between the room (both demos, and Redis) and the load generator
    # (wrk), each against before: the two share the two cores, so the polls a second a window holds depend on both.
    def cpu(xs):
        polls = max(sum(x["polls"] for x in xs), 1)
        return (sum(x["demo_s"] + x["redis_s"] for x in xs) * 1e6 / polls, sum(x["wrk_s"] for x in xs) * 1e6 / polls)

    base_room, base_wrk = cpu(before) if before else (float("nan"), float("nan"))
    print("| window | rounds | polls/s (mean) | vs before | p99 (median / worst round) | Redis commands per poll | "
          "of which script calls | CPU a poll: the room (demos and Redis), wrk (× before) | target | met |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, xs, target in (("before the opening", before, None), ("the 30 s after the opening", first30, 0.05),
                             ("the minute after that", minute, 0.01)):
        if not xs:
            print(f"| {name} | 0 | – | – | – | – | – | – | – | – |")
            continue
        rps = statistics.mean(x["rps"] for x in xs)
        per = sum(x["cmds"] for x in xs) / max(sum(x["polls"] for x in xs), 1)
        evalsha = sum(x["by_command"].get("evalsha", 0) for x in xs) / max(sum(x["polls"] for x in xs), 1)
        ratio = rps / base_rps
        room, wrk = cpu(xs)
        if target is None:
            t, met = "–", "–"
        else:
            t = f"polls/s ≥ 0.9× before; commands a poll ≤ {target}"
            met = f"{'yes' if ratio >= 0.9 else 'NO'} / {'yes' if per <= target else 'NO'}"
        print(f"| {name} | {len(xs)} | {rps:,.0f} | {ratio:.2f} | {statistics.median(x['p99'] for x in xs) / 1000:.2f} / "
              f"{max(x['p99'] for x in xs) / 1000:.2f} ms | {per:.4f} | {evalsha:.4f} | {room:.1f} µs ({room / base_room:.2f}), "
              f"{wrk:.1f} µs ({wrk / base_wrk:.2f}) | {t} | {met} |")
    print()
    # SLOWLOG: [id, unix seconds, µs, [args], client, name]
    bounds = dict(phases)

    def phase(ts):
        if ts < int(bounds["joined"]):
            return "joins and first polls"
        if ts < int(bounds["opening"]):
            return "pre-queue polls before the opening"
        return "the draw, the opening and after"

    name = lambda e: command_name(e, shas)

    print(f"SLOWLOG (commands slower than {args.slowlog_us:,} µs; {len(slow):,} entries; commands run by scripts are logged too):")
    print("| phase | entries | longest | its command | over 5 ms (by command) |")
    print("|---|---|---|---|---|")
    for ph in ("joins and first polls", "pre-queue polls before the opening", "the draw, the opening and after"):
        es = [e for e in slow if phase(int(e[1])) == ph]
        if not es:
            print(f"| {ph} | 0 | – | – | 0 |")
            continue
        top = max(es, key=lambda e: int(e[2]))
        over = {}
        for e in es:
            if int(e[2]) > 5000:
                over[name(e)] = over.get(name(e), 0) + 1
        over_s = ", ".join(f"{n} ×{c}" for n, c in sorted(over.items(), key=lambda kv: -kv[1])) or "none"
        print(f"| {ph} | {len(es)} | {int(top[2]):,} µs | {name(top)} ({int(top[1]) - bounds['opening']:+.0f} s from the opening) | "
              f"{sum(over.values())}: {over_s} |")
    print()
    print("The ten longest: " + "; ".join(f"{int(e[2]):,} µs {name(e)} ({int(e[1]) - bounds['opening']:+.0f} s, "
                                          f"{time.strftime('%H:%M:%S', time.gmtime(int(e[1])))})"
                                          for e in sorted(slow, key=lambda e: -int(e[2]))[:10]))
    for label, xs in (("the rounds before the opening", before), ("the 30 s after the opening", first30),
                      ("the minute after that", minute)):
        total = {}
        for x in xs:
            for k, v in x["by_command"].items():
                total[k] = total.get(k, 0) + v
        polls = max(sum(x["polls"] for x in xs), 1)
        d = sorted(total.items(), key=lambda kv: -kv[1])[:10]
        print(f"Redis calls by command in {label} (`INFO commandstats`, commands run by scripts included), per 1,000 polls: "
              + ", ".join(f"{k} {1000 * v / polls:.3f}" for k, v in d))
    for x in rounds:
        if 0 <= x["at"] < args.round:
            d = sorted(x["by_usec"].items(), key=lambda kv: -kv[1])[:10]
            print(f"Redis's time by command in the opening's round (+0 s, `INFO commandstats`; `evalsha` is the scripts' "
                  f"whole time, the commands they run counted again under their names), ms: "
                  + ", ".join(f"{k} {v / 1000:,.0f}" for k, v in d))
    print()
    c = stats.get("counters", {})
    print(f"The room at the end: {stats.get('active', 0):,} active of {stats.get('capacity', 0):,}, {stats.get('waiting', 0):,} waiting, "
          f"{stats.get('prequeue', 0):,} in the pre-queue, {stats.get('away', 0):,} away; counters "
          + ", ".join(f"{k} {v:,}" for k, v in c.items() if isinstance(v, int)))
    for k, m in enumerate(kit):
        keep = {n: int(v) for n, v in m.items() if any(w in n for w in ("polls", "draw_pages", "draw_numbers_kept", "tickets_",
                                                                          "store_errors", "tokens_issued", "ticket_batches"))}
        print(f"instance {k}: " + ", ".join(f"{n} {v:,}" for n, v in sorted(keep.items())))
    print(f"Load average (1, 5, 15 min): {load_start} at the start, {load_open} at the opening, {load_end} at the end.")


def report_stalls(slow, stalls, problems, steal, seconds, shas, cores, disk):
    """The machine's own stalls, and which long SLOWLOG entries fall in one."""
    print()
    if problems:
        print("The stall detector did not work as meant (what follows undercounts the stalls): " + "; ".join(problems))
    longest = max((ms for _, ms, _ in stalls), default=0)
    print(f"The machine: {steal:.1f} s of steal in {seconds:.0f} s on {cores} cores (`/proc/stat`); "
          f"{len(stalls)} stalls over {STALL_MS} ms seen by a SCHED_FIFO 11 thread on each core, the longest {longest:.0f} ms, "
          f"{sum(ms for _, ms, _ in stalls) / 1000:.1f} s in all.")
    if disk.samples:
        first, last = disk.samples[0], disk.samples[-1]
        print(f"The disk: redis-server took {last.majflt - first.majflt:,} major page faults (its pages read back from disk), and "
              f"every task here waited on the disk for {(last.io_full_us - first.io_full_us) / 1e6:.1f} s in all (`/proc/pressure/io`, full); "
              f"it took {last.minflt - first.minflt:,} minor page faults (pages touched for the first time).")
        steps = disk.clock_steps()
        print(f"The wall clock: {len(steps)} steps over 2 ms against the monotonic clock"
              + (": " + ", ".join(f"{ms:+,.0f} ms at {time.strftime('%H:%M:%S', time.gmtime(t))}" for t, ms in steps)
                 if steps else "") + ".")
    # SLOWLOG dates an entry to the second: one over 5 ms falls in a stall when a stall at least half its length, on
    # any core (Redis is not pinned), began within that second or the one before. With many short stalls a match of
    # an entry near 5 ms may be chance; for the long ones it is not.
    over = [e for e in slow if int(e[2]) > 5000]
    if not over:
        return
    inside = []
    for e in over:
        t, us = int(e[1]), int(e[2])
        if any(t - 1 <= st < t + 1 and ms * 1000 >= us / 2 for st, ms, _ in stalls):
            inside.append(e)
    rest = [e for e in over if e not in inside]
    kernel = [e for e in rest if held(disk, int(e[1]), int(e[2]))]
    print(f"Of the {len(over)} commands over 5 ms, {len(inside)} fall in such a stall (a stall of half its length or more, "
          "on any core, begun within its second or the one before: it timed the stall, not the command): "
          + "; ".join(f"{int(e[2]):,} µs {command_name(e, shas)}" for e in inside)
          + (f"; {len(kernel)} while the kernel held redis-server's main thread for half of it or more (sampled in "
             "state D, an uninterruptible wait in the kernel: it timed that wait, not the command): " + "; ".join(
              f"{int(e[2]):,} µs {command_name(e, shas)}{shape(e)}" + waited(disk, int(e[1]), int(e[2])) for e in kernel)
             if kernel else "")
          + ("" if len(inside) + len(kernel) == len(over) else "; neither: " + "; ".join(
              f"{int(e[2]):,} µs {command_name(e, shas)}{shape(e)}" + waited(disk, int(e[1]), int(e[2]))
              for e in rest if e not in kernel)))


def shape(entry):
    """A SLOWLOG entry's size: how many arguments (Redis keeps the first 32 and says how many more), and its key."""
    a = [str(x) for x in (entry[3] or [])]
    more = next((int(m.group(1)) for x in a[-1:] if (m := re.match(r"\.\.\. \((\d+) more arguments\)", x))), 0)
    count = len(a) - (1 if more else 0) + more
    return f" ({count:,} arguments, key {a[1][:40]!r})" if len(a) > 1 else ""


def held(disk, t, us):
    """Whether redis-server's main thread was held in the kernel (state D: an uninterruptible wait, such as a lock
    of its memory map) for at least half of a command of `us` µs that SLOWLOG logged in second t: then the command
    timed the kernel's wait, not its own work. The command lies somewhere in [t - us, t + 1) (SLOWLOG dates it by
    the second of its end), so the samples in state D are counted in each stretch of its length there, and the
    most is taken. Needs 100 ms samples inside it, so commands of 200 ms or more; below a second the stretch is
    not known exactly, so a wait just beside the command may be counted (the report says "for half of it or more"
    of the stretch, not of the command)."""
    if us < THREADS_US:
        return False
    dur = us / 1e6
    pid = str(disk.pid)
    d = [x.t for x in disk.samples
         if t - dur <= x.t < t + 1 and pid in x.threads and x.threads[pid][1].startswith("D")]
    most = max((sum(1 for y in d if s <= y <= s + dur) for s in d), default=0)
    return most * 0.1 >= dur / 2


def waited(disk, t, us=0):
    """What the disk did around second t, for a long command no stall explains; and, for one of 200 ms or more
    (enough 100 ms samples inside it), what each of redis-server's threads did while it ran."""
    faults, full_ms, step_ms, minor = disk.around(t)
    if not faults and full_ms < 1 and abs(step_ms) < 2:
        out = " (no disk wait or clock step around it"
    else:
        out = (f" (around it redis-server took {faults} major page faults; every task waited on the disk {full_ms:,.0f} ms; "
               f"the wall clock stepped {step_ms:+,.0f} ms")
    out += f"; {minor:,} minor page faults of redis-server from the second before it to the one after)"
    if us >= THREADS_US:
        # SLOWLOG dates the entry by the second it was logged in, at the command's end.
        rows = disk.threads_during(t - us / 1e6, t + 1)
        out += "; redis-server's threads from a second before it to a second after its end: " + "; ".join(
            f"{name} ran {run:,.0f} ms, waited for a core {wait:,.0f} ms, sampled "
            + ", ".join(f"{st} x{n}" for st, n in sorted(states.items())) for name, run, wait, states in rows)
    return out


if __name__ == "__main__":
    main()
