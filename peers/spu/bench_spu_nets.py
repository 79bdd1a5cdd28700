#!/usr/bin/env python3
"""Peer baseline: SecretFlow SPU (Cheetah, 2PC) on whole networks (mnist-d, minionn-cifar,
residual-block-cifar).

Derived from /work/shared/peers/spu/bench_spu.py (the SPU 0.9.5 Cheetah peer benchmark
of this project: same runtime config, same two-process brpc/loopback deployment, same
private-input handling, same per-party link statistics and latency-probe code).
What changed here: the `net` cases below (the two networks of helina's built-in zoo,
crates/nn/src/zoo.rs, written in JAX with seeded random weights), the default case
list and output file, `--max-extra`, the jax float32 reference with an argmax check,
and the short table (`--table`).  The original matvec / conv / ReLU cases are still
available through --cases.

Exact commands (from the repository root, venv made once):

    python3 -m venv /tmp/spu-venv && /tmp/spu-venv/bin/pip install spu==0.9.5
    /tmp/spu-venv/bin/python peers/spu/bench_spu_nets.py --cases mnist-d --reps 5 \
        --out peers/spu/results_nets.json
    /tmp/spu-venv/bin/python peers/spu/bench_spu_nets.py --cases minionn-cifar --reps 3 \
        --max-extra 0 --out peers/spu/results_nets.json      # merges into the same file
    /tmp/spu-venv/bin/python peers/spu/bench_spu_nets.py --table peers/spu/results_nets.json
    # rounds (not run for RESULTS in README.md; needs the json above, adds 'round_probe'):
    /tmp/spu-venv/bin/python peers/spu/bench_spu_nets.py --probe-delay-ms 200 \
        --cases mnist-d --reps 2 --out peers/spu/results_nets.json

Networks (NHWC inside SPU; the flatten is done in NCHW order so that the FC weights
have torch's layout; weights and biases ~ U(-1/sqrt(fan_in), +1/sqrt(fan_in)) like
torch's default init, seed 12345; input x ~ U(-1, 1); batch 1):

* mnist-d (GAZELLE MNIST D / MiniONN MNIST CNN): 1x28x28 -> Conv 1->16 5x5 valid +b ->
  ReLU -> MaxPool 2x2 -> Conv 16->16 5x5 valid +b -> ReLU -> MaxPool 2x2 -> Flatten 256
  -> FC 256->100 +b -> ReLU -> FC 100->10 +b.
* minionn-cifar (MiniONN CIFAR-10, Figure 13): 3x32x32 -> Conv 3->64 3x3 pad 1 -> ReLU ->
  Conv 64->64 3x3 -> ReLU -> AvgPool 2x2 -> Conv 64->64 3x3 -> ReLU -> Conv 64->64 3x3 ->
  ReLU -> AvgPool 2x2 -> Conv 64->64 3x3 -> ReLU -> Conv 64->64 1x1 -> ReLU ->
  Conv 64->16 1x1 -> ReLU -> Flatten 1024 -> FC 1024->10 (all with bias).
* residual-block-cifar (a CIFAR-sized residual network): 3x32x32 -> Conv 3->16 3x3 pad 1
  -> ReLU -> basic block 16->16 (Conv 3x3 -> ReLU -> Conv 3x3, + x, ReLU) -> basic block
  16->32 stride 2 (Conv 3x3 stride 2 pad 1 -> ReLU -> Conv 3x3, + Conv 1x1 stride 2 of
  the block's input, ReLU) -> mean over 16x16 -> FC 32->10 (all with bias: the BN that
  helina's zoo network carries is folded into the convolutions at inference).

Every weight and bias is a private input of rank 1 (server), x a private input of rank
0 (client).  MaxPool 2x2 = max of the 4 strided sub-grids as a depth-2 tree of
jnp.maximum (3 secure comparisons per output); AvgPool 2x2 = sum of the 4 sub-grids
times the public constant 0.25 (one truncation).  Layers run in the order written
(ReLU before MaxPool, no reordering).  The logits stay secret-shared at the end (as in
the original script); the driver reconstructs them out of band for the error check.

Notes copied from the original script follow.

What it does (original script)
------------------------------
* The driver (this process) builds each jax function, compiles it to SPU
  bytecode (timed separately: "compile_s"), encodes the inputs and writes one
  input file per party.  Two *separate OS processes* (rank 0 = client,
  rank 1 = server) are then started; they connect with SPU's brpc link over
  TCP on 127.0.0.1 and run the SPU executable.
* Privacy of inputs (experimental_enable_colocated_optimization=True and
  make_shares(..., VIS_SECRET, owner_rank=r)): the client's x is a *private*
  value (Priv2k, owner rank 0) and the server's W / conv filters are a private
  value of rank 1.  The other party's slot holds an all-zero placeholder (this
  is checked: "nonowner_share_all_zero").  SPU then dispatches the product of
  two differently-owned private values to Cheetah's MatMulVVS kernel
  (HE DotOLE: one party encrypts its operand, the other multiplies it with
  its plaintext matrix and returns masked ciphertexts).  The output stays
  additively secret-shared (AShr); the fixed-point truncation that follows
  the product (Cheetah TruncA, OT based) is inside the timed run.
* ReLU: the input is an additive secret sharing (random split made by the
  driver), so only max(x, 0) on shares is measured.
* Per run, each party records wall time (after a link barrier), its process
  CPU time and thread count, and SPU's own per-execution link statistics
  (enable_pphlo_profile / enable_hal_profile -> "Link details: total send
  bytes ..., send actions ...", plus the per-MPC-kernel breakdown).
* Run 0 on a fresh runtime includes Cheetah's one-time setup (HE key
  generation/exchange incl. Galois keys, Ferret silent-OT setup); it is
  reported separately as "first_run".  Runs 1..reps reuse the same runtime
  ("warm"), and min/median over them are reported.
* Correctness: the two output shares are sent back to the driver (out of
  band, not part of the protocol), reconstructed and compared with numpy
  (float64) -> max abs error after fixed-point decoding.
"""
import argparse
import json
import os
import pickle
import platform
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

FXP_BITS = 18
HERE = os.path.dirname(os.path.abspath(__file__))


def make_config():
    import spu.libspu as L

    cfg = L.RuntimeConfig(protocol=L.ProtocolKind.CHEETAH, field=L.FieldType.FM64)
    cfg.fxp_fraction_bits = FXP_BITS
    cfg.experimental_enable_colocated_optimization = True
    cfg.enable_pphlo_profile = True
    cfg.enable_hal_profile = True
    return cfg


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------
def case_defs():
    """name -> (kind, params)"""
    d = {}
    for no, ni in [(16, 128), (1, 2048), (128, 784), (512, 512)]:
        d[f"mv_{no}x{ni}"] = ("matvec", dict(no=no, ni=ni))
    d["conv_16x16x128_k1x1_o128"] = ("conv", dict(H=16, W=16, C=128, O=128, k=1, s=1, pad="SAME"))
    d["conv_16x16x128_k3x3_o128"] = ("conv", dict(H=16, W=16, C=128, O=128, k=3, s=1, pad="SAME"))
    d["conv_28x28x1_k5x5_o5_s2"] = ("conv", dict(H=28, W=28, C=1, O=5, k=5, s=2, pad="VALID"))
    d["conv_32x32x32_k3x3_o32"] = ("conv", dict(H=32, W=32, C=32, O=32, k=3, s=1, pad="SAME"))
    d["relu_10000"] = ("relu", dict(n=10000))
    d["mv_4096x4096"] = ("matvec", dict(no=4096, ni=4096))  # last: the largest
    # whole networks (helina's zoo, crates/nn/src/zoo.rs)
    d["mnist-d"] = ("net", dict(net="mnist-d", input_chw=[1, 28, 28]))
    d["minionn-cifar"] = ("net", dict(net="minionn-cifar", input_chw=[3, 32, 32]))
    d["residual-block-cifar"] = ("net", dict(net="residual-block-cifar", input_chw=[3, 32, 32]))
    return d


NET_CASES = ["mnist-d", "minionn-cifar", "residual-block-cifar"]


def net_layers(net):
    """The layer list of a network: ("conv", name, c_in, c_out, k, pad) / ("relu",) /
    ("maxpool",) / ("avgpool",) / ("flatten",) / ("fc", name, n_in, n_out) /
    ("block", name, c_in, c_out, stride): a basic residual block, relu(conv3x3(stride,
    pad 1) -> relu -> conv3x3 + shortcut), the shortcut a 1x1 conv with the stride where
    the shape changes / ("gap",): the mean over H and W."""
    if net == "mnist-d":
        return [("conv", "conv1", 1, 16, 5, 0), ("relu",), ("maxpool",),
                ("conv", "conv2", 16, 16, 5, 0), ("relu",), ("maxpool",),
                ("flatten",), ("fc", "fc1", 256, 100), ("relu",), ("fc", "fc2", 100, 10)]
    if net == "minionn-cifar":
        L = []
        for i, (ci, co, k) in enumerate([(3, 64, 3), (64, 64, 3), (64, 64, 3), (64, 64, 3),
                                         (64, 64, 3), (64, 64, 1), (64, 16, 1)]):
            L += [("conv", f"conv{i}", ci, co, k, k // 2), ("relu",)]
            if i in (1, 3):
                L.append(("avgpool",))
        return L + [("flatten",), ("fc", "fc", 1024, 10)]
    if net == "residual-block-cifar":
        return [("conv", "conv1", 3, 16, 3, 1), ("relu",),
                ("block", "layer1.0", 16, 16, 1), ("block", "layer2.0", 16, 32, 2),
                ("gap",), ("fc", "fc", 32, 10)]
    raise ValueError(net)


def build_net(p, rng):
    """fn(*params, x), inputs [(name, array, owner)], reference."""
    import jax
    import jax.numpy as jnp

    layers = net_layers(p["net"])
    c, h, w = p["input_chw"]
    # x first in the rng stream, then the parameters in layer order
    x = rng.uniform(-1, 1, size=(1, h, w, c)).astype(np.float32)  # NHWC
    params = []  # (name, array)

    def conv_params(n, ci, co, k):
        bound = 1.0 / np.sqrt(ci * k * k)
        params.append((f"{n}.weight", rng.uniform(-bound, bound, size=(k, k, ci, co)).astype(np.float32)))
        params.append((f"{n}.bias", rng.uniform(-bound, bound, size=(co,)).astype(np.float32)))

    for l in layers:
        if l[0] == "conv":
            _, n, ci, co, k, _pad = l
            conv_params(n, ci, co, k)
        elif l[0] == "block":
            _, n, ci, co, stride = l
            conv_params(f"{n}.conv1", ci, co, 3)
            conv_params(f"{n}.conv2", co, co, 3)
            if stride != 1 or ci != co:
                conv_params(f"{n}.shortcut", ci, co, 1)
        elif l[0] == "fc":
            _, n, ni, no = l
            bound = 1.0 / np.sqrt(ni)
            params.append((f"{n}.weight", rng.uniform(-bound, bound, size=(ni, no)).astype(np.float32)))
            params.append((f"{n}.bias", rng.uniform(-bound, bound, size=(no,)).astype(np.float32)))

    def sub(y, i, j):
        # strided slice (pphlo.slice, local); python's y[:, i::2, j::2] becomes a gather
        return jax.lax.slice(y, (0, i, j, 0), y.shape, (1, 2, 2, 1))

    def maxpool2(y):
        a = jnp.maximum(sub(y, 0, 0), sub(y, 0, 1))
        b = jnp.maximum(sub(y, 1, 0), sub(y, 1, 1))
        return jnp.maximum(a, b)

    def avgpool2(y):
        return (sub(y, 0, 0) + sub(y, 0, 1) + sub(y, 1, 0) + sub(y, 1, 1)) * 0.25

    def conv(y, w, b, stride, pad):
        return jax.lax.conv_general_dilated(
            y, w, window_strides=(stride, stride), padding=[(pad, pad), (pad, pad)],
            dimension_numbers=("NHWC", "HWIO", "NHWC")) + b

    def fn(*args):
        ps, y = list(args[:-1]), args[-1]
        i = 0
        for l in layers:
            if l[0] == "conv":
                y = conv(y, ps[i], ps[i + 1], 1, l[5])
                i += 2
            elif l[0] == "block":
                _, _n, ci, co, stride = l
                z = jax.nn.relu(conv(y, ps[i], ps[i + 1], stride, 1))
                z = conv(z, ps[i + 2], ps[i + 3], 1, 1)
                i += 4
                if stride != 1 or ci != co:
                    sc = conv(y, ps[i], ps[i + 1], stride, 0)
                    i += 2
                else:
                    sc = y
                y = jax.nn.relu(z + sc)
            elif l[0] == "gap":
                y = jnp.mean(y, axis=(1, 2))
            elif l[0] == "fc":
                y = jnp.matmul(y, ps[i]) + ps[i + 1]
                i += 2
            elif l[0] == "relu":
                y = jax.nn.relu(y)
            elif l[0] == "maxpool":
                y = maxpool2(y)
            elif l[0] == "avgpool":
                y = avgpool2(y)
            elif l[0] == "flatten":
                y = jnp.transpose(y, (0, 3, 1, 2)).reshape(1, -1)  # NCHW order, like torch
        return y

    inputs = [(n, a, 1) for n, a in params] + [("x", x, 0)]

    def ref():
        # plaintext float32 reference of the same jax function (XLA CPU)
        return np.asarray(jax.jit(fn)(*[a for _, a, _ in inputs]), dtype=np.float64)

    p = dict(p, n_params=int(sum(a.size for _, a in params)),
             layers=[list(l) for l in layers])
    return fn, inputs, ref, p


def build_case(name):
    """Returns fn, list of (input_name, array, owner_rank or -1), ref_fn."""
    import jax
    import jax.numpy as jnp

    kind, p = case_defs()[name]
    rng = np.random.default_rng(12345)
    if kind == "net":
        return build_net(p, rng)
    if kind == "matvec":
        no, ni = p["no"], p["ni"]
        W = (rng.uniform(-1, 1, size=(no, ni)) / np.sqrt(ni)).astype(np.float32)
        x = rng.uniform(-1, 1, size=(ni,)).astype(np.float32)

        def fn(W, x):
            return jnp.matmul(W, x)

        inputs = [("W", W, 1), ("x", x, 0)]
        ref = lambda: W.astype(np.float64) @ x.astype(np.float64)
        return fn, inputs, ref, p
    if kind == "conv":
        H, Wd, C, O, k, s, pad = p["H"], p["W"], p["C"], p["O"], p["k"], p["s"], p["pad"]
        x = rng.uniform(-1, 1, size=(1, H, Wd, C)).astype(np.float32)
        K = (rng.uniform(-1, 1, size=(k, k, C, O)) / np.sqrt(k * k * C)).astype(np.float32)

        def fn(K, x):
            return jax.lax.conv_general_dilated(
                x, K, window_strides=(s, s), padding=pad,
                dimension_numbers=("NHWC", "HWIO", "NHWC"))

        inputs = [("K", K, 1), ("x", x, 0)]

        def ref():
            # float64 reference via numpy im2col
            xp = x.astype(np.float64)
            if pad == "SAME":
                out_h = -(-H // s)
                out_w = -(-Wd // s)
                ph = max((out_h - 1) * s + k - H, 0)
                pw = max((out_w - 1) * s + k - Wd, 0)
                xp = np.pad(xp, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
            else:
                out_h = (H - k) // s + 1
                out_w = (Wd - k) // s + 1
            out = np.zeros((1, out_h, out_w, O))
            Kd = K.astype(np.float64).reshape(k * k * C, O)
            for i in range(out_h):
                for j in range(out_w):
                    patch = xp[0, i * s:i * s + k, j * s:j * s + k, :].reshape(-1)
                    out[0, i, j] = patch @ Kd
            return out

        return fn, inputs, ref, p
    if kind == "relu":
        n = p["n"]
        x = rng.uniform(-4, 4, size=(n,)).astype(np.float32)

        def fn(x):
            return jax.nn.relu(x)

        inputs = [("x", x, -1)]
        ref = lambda: np.maximum(x.astype(np.float64), 0.0)
        return fn, inputs, ref, p
    raise ValueError(name)


# --------------------------------------------------------------------------
# log parsing
# --------------------------------------------------------------------------
RE_LINK = re.compile(
    r"Link details: total send bytes (\d+), recv bytes (\d+), send actions (\d+), recv actions (\d+)")
RE_EXEC = re.compile(r"\[Profiling\] SPU execution (\S+) completed, .*execution took ([0-9.e-]+)s")
RE_MOD = re.compile(r"(HLO|HAL|MPC) profiling: total time ([0-9.e-]+)")
RE_OP = re.compile(
    r"- (\S+), executed (\d+) times, duration ([0-9.e-]+)s, send bytes (\d+) recv bytes (\d+), "
    r"send actions (\d+), recv actions (\d+)")


def parse_log(path):
    runs = []
    cur = None
    mod = None
    with open(path, errors="replace") as f:
        for line in f:
            m = RE_EXEC.search(line)
            if m:
                cur = {"spu_exec_s": float(m.group(2)), "mpc_ops": {}, "hal_ops": {}}
                continue
            m = RE_MOD.search(line)
            if m and cur is not None:
                mod = m.group(1)
                continue
            m = RE_OP.search(line)
            if m and cur is not None and mod in ("MPC", "HAL"):
                cur[mod.lower() + "_ops"][m.group(1)] = dict(
                    count=int(m.group(2)), s=float(m.group(3)), send_bytes=int(m.group(4)),
                    recv_bytes=int(m.group(5)), send_actions=int(m.group(6)),
                    recv_actions=int(m.group(7)))
                continue
            m = RE_LINK.search(line)
            if m and cur is not None:
                cur.update(send_bytes=int(m.group(1)), recv_bytes=int(m.group(2)),
                           send_actions=int(m.group(3)), recv_actions=int(m.group(4)))
                runs.append(cur)
                cur = None
    return runs


# --------------------------------------------------------------------------
# worker (one party)
# --------------------------------------------------------------------------
def worker(spec_path):
    import spu.libspu as L
    from spu import api as spu_api

    with open(spec_path, "rb") as f:
        spec = pickle.load(f)
    rank = spec["rank"]
    cfg = make_config()
    exe = L.Executable()
    exe.ParseFromString(spec["exe"])

    desc = L.link.Desc()
    desc.id = spec["link_id"]
    desc.recv_timeout_ms = 3600 * 1000
    desc.http_timeout_ms = 3600 * 1000
    desc.connect_retry_times = 120
    desc.connect_retry_interval_ms = 500
    for r in range(2):
        # own entry: the port we listen on; peer entry: where we connect to
        # (the peer's real port, or a local delay proxy in --probe-delay-ms mode)
        port = spec["ports"][r] if r == rank else spec["connect_ports"][r]
        desc.add_party(f"party{r}", f"127.0.0.1:{port}")
    lctx = L.link.create_brpc(desc, rank)
    rt = spu_api.Runtime(lctx, cfg)
    for name, (meta, chunks) in spec["inputs"].items():
        sh = L.Share()
        sh.meta = meta
        sh.share_chunks = chunks
        rt.set_var(name, sh)

    runs = []
    for i in range(spec["nruns"]):
        lctx.barrier()
        c0 = time.process_time()
        t0 = time.perf_counter()
        rt.run(exe)
        t1 = time.perf_counter()
        c1 = time.process_time()
        with open("/proc/self/status") as f:
            threads = int([l for l in f if l.startswith("Threads:")][0].split()[1])
        runs.append(dict(wall_s=t1 - t0, cpu_s=c1 - c0, threads=threads))
        print(f"BENCH_RUN_DONE rank={rank} run={i} wall={t1 - t0:.4f}", flush=True)
    outs = []
    for n in exe.output_names:
        s = rt.get_var(n)
        outs.append((bytes(s.meta), [bytes(c) for c in s.share_chunks]))
    lctx.barrier()
    lctx.stop_link()
    res = dict(rank=rank, runs=runs, outputs=outs,
               maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    with open(spec["out_path"], "wb") as f:
        pickle.dump(res, f)


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------
def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def prepare(name):
    import spu.libspu as L
    from spu import api as spu_api
    from spu.utils import frontend as fe

    fn, inputs, ref, params = build_case(name)
    cfg = make_config()
    io = spu_api.Io(2, cfg)
    vis = [L.Visibility.VIS_SECRET] * len(inputs)
    t0 = time.perf_counter()
    exe, _ = fe.compile(fe.Kind.JAX, fn, [a for _, a, _ in inputs], {},
                        [n for n, _, _ in inputs], vis,
                        lambda o: [f"out{i}" for i in range(len(o))])
    compile_s = time.perf_counter() - t0
    per_rank = [{}, {}]
    share_info = {}
    t0 = time.perf_counter()
    for n, a, owner in inputs:
        shares = io.make_shares(a, L.Visibility.VIS_SECRET, owner)
        info = {"owner_rank": owner}
        for r in range(2):
            m = L.ValueMeta()
            m.ParseFromString(shares[r].meta)
            info[f"rank{r}_storage"] = m.storage_type
            per_rank[r][n] = (bytes(shares[r].meta), [bytes(c) for c in shares[r].share_chunks])
        if owner >= 0:
            other = 1 - owner
            info["nonowner_share_all_zero"] = all(
                len(c) <= 16 or not any(c[16:]) for c in per_rank[other][n][1])
        share_info[n] = info
    share_s = time.perf_counter() - t0
    return dict(exe=exe, compile_s=compile_s, encode_s=share_s, per_rank=per_rank,
                share_info=share_info, ref=ref, params=params, io=io, cfg=cfg,
                pphlo=exe.code.decode()[:4000])


class DelayProxy:
    """127.0.0.1 TCP forwarder that delays every chunk by `delay_s` (order kept).

    Used only to estimate the number of sequential message flights
    (rounds) of a protocol: extra_time / delay ~= one-way flights on the
    critical path."""

    def __init__(self, target_port, delay_s):
        import threading
        self.delay_s = delay_s
        self.target = ("127.0.0.1", target_port)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _pump(self, src, dst):
        import queue
        import threading
        q = queue.Queue()

        def writer():
            while True:
                item = q.get()
                if item is None:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                due, data = item
                dt = due - time.perf_counter()
                if dt > 0:
                    time.sleep(dt)
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=writer, daemon=True).start()
        while True:
            try:
                data = src.recv(1 << 20)
            except OSError:
                data = b""
            if not data:
                q.put(None)
                return
            q.put((time.perf_counter() + self.delay_s, data))

    def _accept(self):
        import threading
        while not self.stop:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(c,), daemon=True).start()

    def _handle(self, c):
        import threading
        u = None
        for _ in range(600):  # the target may not listen yet: retry for <= 60 s
            try:
                u = socket.create_connection(self.target)
                break
            except OSError:
                time.sleep(0.1)
        if u is None:
            c.close()
            return
        for sk in (c, u):
            sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=self._pump, args=(c, u), daemon=True).start()
        threading.Thread(target=self._pump, args=(u, c), daemon=True).start()

    def close(self):
        self.stop = True
        self.lsock.close()


def launch(name, prep, nruns, tmpdir, timeout, delay_ms=0.0):
    ports = free_ports(2)
    proxies = []
    if delay_ms > 0:
        proxies = [DelayProxy(ports[r], delay_ms / 1000.0) for r in range(2)]
        connect_ports = [pr.port for pr in proxies]
    else:
        connect_ports = ports
    link_id = f"bench_{name}_{os.getpid()}_{time.time_ns()}"
    procs, logs, outs = [], [], []
    for r in range(2):
        spec = dict(rank=r, exe=prep["exe"].SerializeToString(), ports=ports,
                    connect_ports=connect_ports, link_id=link_id,
                    inputs=prep["per_rank"][r], nruns=nruns,
                    out_path=os.path.join(tmpdir, f"{name}_out{r}.pkl"))
        sp = os.path.join(tmpdir, f"{name}_spec{r}.pkl")
        with open(sp, "wb") as f:
            pickle.dump(spec, f)
        logp = os.path.join(tmpdir, f"{name}_rank{r}.log")
        lf = open(logp, "w")
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", sp],
                             stdout=lf, stderr=subprocess.STDOUT)
        procs.append((p, lf))
        logs.append(logp)
        outs.append(spec["out_path"])
    t_start = time.perf_counter()
    rcs = []
    for p, lf in procs:
        left = max(1, timeout - (time.perf_counter() - t_start))
        try:
            rcs.append(p.wait(timeout=left))
        except subprocess.TimeoutExpired:
            rcs.append("timeout")
        lf.close()
    for pr in proxies:
        pr.close()
    if any(rc != 0 for rc in rcs):
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        tails = []
        for lp in logs:
            with open(lp, errors="replace") as f:
                tails.append(f.read()[-3000:])
        return dict(error=f"worker rcs={rcs}", log_tails=tails)
    res = []
    for r in range(2):
        with open(outs[r], "rb") as f:
            w = pickle.load(f)
        w["spu_runs"] = parse_log(logs[r])
        res.append(w)
    return dict(workers=res)


def summarize_runs(workers, idxs):
    rows = []
    for i in idxs:
        r0, r1 = workers[0], workers[1]
        s0 = r0["spu_runs"][i] if i < len(r0["spu_runs"]) else {}
        s1 = r1["spu_runs"][i] if i < len(r1["spu_runs"]) else {}
        rows.append(dict(
            wall_s=max(r0["runs"][i]["wall_s"], r1["runs"][i]["wall_s"]),
            wall_s_rank0=r0["runs"][i]["wall_s"], wall_s_rank1=r1["runs"][i]["wall_s"],
            cpu_s_rank0=r0["runs"][i]["cpu_s"], cpu_s_rank1=r1["runs"][i]["cpu_s"],
            threads_rank0=r0["runs"][i]["threads"], threads_rank1=r1["runs"][i]["threads"],
            sent_bytes_rank0=s0.get("send_bytes"), sent_bytes_rank1=s1.get("send_bytes"),
            send_actions_rank0=s0.get("send_actions"), send_actions_rank1=s1.get("send_actions"),
            mpc_ops_rank0={k: v for k, v in s0.get("mpc_ops", {}).items()},
            mpc_ops_rank1={k: v for k, v in s1.get("mpc_ops", {}).items()},
        ))
    return rows


def kernel_summary(warm):
    """Per MPC kernel and rank: median over the warm runs of time, calls, bytes sent,
    send actions (from SPU's profiler)."""
    out = {}
    for rank in (0, 1):
        key = f"mpc_ops_rank{rank}"
        ops = sorted({k for r in warm for k in r[key]})
        d = {}
        for op in ops:
            vals = [r[key].get(op, {}) for r in warm]
            d[op] = {f: statistics.median(v.get(f, 0) for v in vals)
                     for f in ("s", "count", "send_bytes", "send_actions")}
        out[f"rank{rank}"] = d
    return out


def fmt_b(b):
    if b is None:
        return "-"
    b = float(b)
    if b >= 1e6:
        return f"{b / 1e6:.2f} MB"
    if b >= 1e3:
        return f"{b / 1e3:.1f} kB"
    return f"{b:.0f} B"


def print_table(results):
    """Short table: one row per case (warm = runs 2.. on the same runtime)."""
    probe = results.get("round_probe", {}).get("cases", {})
    print("| case | warm median s | warm min-max s | warm runs | first run s (incl. setup) "
          "| sent r0 client->server | sent r1 server->client | total | msgs r0/r1 "
          "| est. one-way flights | first-run bytes r0 / r1 | top kernels r0 (s) | max abs err | argmax ok |")
    print("|" + "---|" * 14)
    for c in results["cases"]:
        if "error" in c:
            print(f"| {c['case']} | ERROR {c['error']} |")
            continue
        f = c["first_run"]
        tot = (c["sent_bytes_rank0"] or 0) + (c["sent_bytes_rank1"] or 0)
        k0 = c.get("mpc_kernels_warm_median", {}).get("rank0", {})
        top = sorted(k0.items(), key=lambda kv: -kv[1]["s"])[:4]
        toptxt = ", ".join(f"{k} {v['s']:.2f}" for k, v in top) if top else "-"
        fl = probe.get(c["case"], {}).get("est_one_way_flights")
        print(f"| {c['case']} | {c['warm_wall_median_s']:.3f} "
              f"| {c['warm_wall_min_s']:.3f}-{c['warm_wall_max_s']:.3f} | {c['n_warm']} "
              f"| {f['wall_s']:.3f} | {fmt_b(c['sent_bytes_rank0'])} | {fmt_b(c['sent_bytes_rank1'])} "
              f"| {fmt_b(tot)} | {c['send_actions_rank0']:.0f}/{c['send_actions_rank1']:.0f} "
              f"| {'-' if fl is None else f'{fl:.1f}'} "
              f"| {fmt_b(f['sent_bytes_rank0'])} / {fmt_b(f['sent_bytes_rank1'])} | {toptxt} "
              f"| {c['max_abs_err']:.2e} | {c.get('argmax_match', '-')} |")


def run_case(name, reps, timeout, tmpdir, spread_limit=1.25, max_extra=1):
    print(f"== {name}", flush=True)
    prep = prepare(name)
    rec = dict(case=name, kind=case_defs()[name][0], params=prep["params"],
               compile_s=prep["compile_s"], encode_s=prep["encode_s"],
               inputs=prep["share_info"], launches=[])
    warm = []
    first = None
    outputs = None
    for attempt in range(1 + max_extra):
        t0 = time.perf_counter()
        L = launch(name, prep, 1 + reps, tmpdir, timeout)
        t_launch = time.perf_counter() - t0
        if "error" in L:
            rec["error"] = L["error"]
            rec["log_tails"] = L["log_tails"]
            print(f"   ERROR {L['error']}", flush=True)
            return rec
        ws = L["workers"]
        f_rows = summarize_runs(ws, [0])
        w_rows = summarize_runs(ws, list(range(1, 1 + reps)))
        rec["launches"].append(dict(process_pair_wall_s=t_launch, first_run=f_rows[0],
                                    warm_runs=w_rows,
                                    maxrss_mb=[ws[0]["maxrss_mb"], ws[1]["maxrss_mb"]]))
        if first is None:
            first = f_rows[0]
        warm += w_rows
        outputs = [ws[0]["outputs"], ws[1]["outputs"]]
        ts = [r["wall_s"] for r in warm]
        print(f"   launch {attempt}: first={f_rows[0]['wall_s']:.3f}s warm={['%.3f' % t for t in ts]}",
              flush=True)
        if max(ts) / min(ts) <= spread_limit:
            break
    # correctness
    import spu.libspu as Lb
    outs = []
    for k in range(len(outputs[0])):
        shs = []
        for r in range(2):
            sh = Lb.Share()
            sh.meta, sh.share_chunks = outputs[r][k]
            shs.append(sh)
        outs.append(np.asarray(prep["io"].reconstruct(shs), dtype=np.float64))
    y = outs[0]
    ref = np.asarray(prep["ref"](), dtype=np.float64).reshape(y.shape)
    err = np.abs(y - ref)
    if rec["kind"] == "net":
        rec["logits"] = y.reshape(-1).tolist()
        rec["ref_logits"] = ref.reshape(-1).tolist()
        rec["argmax"] = int(np.argmax(y))
        rec["ref_argmax"] = int(np.argmax(ref))
        rec["argmax_match"] = rec["argmax"] == rec["ref_argmax"]
    m0 = Lb.ValueMeta()
    m0.ParseFromString(outputs[0][0][0])
    ts = sorted(r["wall_s"] for r in warm)
    med = lambda key: statistics.median([r[key] for r in warm if r[key] is not None]) \
        if any(r[key] is not None for r in warm) else None
    rec.update(
        output_shape=list(y.shape), output_storage=m0.storage_type,
        max_abs_err=float(err.max()), mean_abs_err=float(err.mean()),
        max_abs_ref=float(np.abs(ref).max()),
        first_run=first, warm_runs=warm,
        warm_wall_min_s=ts[0], warm_wall_median_s=statistics.median(ts),
        warm_wall_max_s=ts[-1], n_warm=len(ts),
        sent_bytes_rank0=med("sent_bytes_rank0"), sent_bytes_rank1=med("sent_bytes_rank1"),
        send_actions_rank0=med("send_actions_rank0"), send_actions_rank1=med("send_actions_rank1"),
        cpu_over_wall_rank0=statistics.median(r["cpu_s_rank0"] / r["wall_s_rank0"] for r in warm),
        cpu_over_wall_rank1=statistics.median(r["cpu_s_rank1"] / r["wall_s_rank1"] for r in warm),
        pphlo=prep["pphlo"],
        mpc_kernels_warm_median=kernel_summary(warm),
    )
    print(f"   warm min={ts[0]:.4f}s med={statistics.median(ts):.4f}s "
          f"sent r0={rec['sent_bytes_rank0']} r1={rec['sent_bytes_rank1']} "
          f"acts r0={rec['send_actions_rank0']} r1={rec['send_actions_rank1']} "
          f"maxerr={rec['max_abs_err']:.3g}", flush=True)
    return rec


def probe_rounds(a):
    """Estimate sequential one-way message flights: for each case, one plain and
    one delayed process pair (1 cold + reps warm runs each); flights ~=
    (median_warm_delayed - median_warm_plain) / delay."""
    with open(a.out) as f:
        results = json.load(f)
    probe = results.setdefault("round_probe", {})
    probe["delay_ms_one_way"] = a.probe_delay_ms
    probe.setdefault("cases", {})
    with tempfile.TemporaryDirectory(prefix="spu_probe_") as tmpdir:
        for name in a.cases.split(","):
            prep = prepare(name)
            rec = {"delay_ms_one_way": a.probe_delay_ms}
            for tag, d in (("plain", 0.0), ("delayed", a.probe_delay_ms)):
                L = launch(name, prep, 1 + a.reps, tmpdir, a.timeout, delay_ms=d)
                if "error" in L:
                    rec[tag] = dict(error=L["error"], log_tails=L["log_tails"])
                    break
                rows = summarize_runs(L["workers"], list(range(0, 1 + a.reps)))
                rec[tag] = dict(first_wall_s=rows[0]["wall_s"],
                                warm_wall_s=[r["wall_s"] for r in rows[1:]],
                                warm_send_actions=[[r["send_actions_rank0"], r["send_actions_rank1"]]
                                                   for r in rows[1:]])
            if "error" not in rec.get("delayed", {"error": 1}) and "plain" in rec:
                dp = statistics.median(rec["delayed"]["warm_wall_s"])
                pp = statistics.median(rec["plain"]["warm_wall_s"])
                rec["est_one_way_flights"] = (dp - pp) / (a.probe_delay_ms / 1000.0)
                rec["est_first_run_one_way_flights"] = (
                    rec["delayed"]["first_wall_s"] - rec["plain"]["first_wall_s"]) / (
                    a.probe_delay_ms / 1000.0)
            print(name, json.dumps({k: v for k, v in rec.items() if k.startswith("est")}), flush=True)
            probe["cases"][name] = rec
            with open(a.out, "w") as f:
                json.dump(results, f, indent=1, default=str)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default=None)
    ap.add_argument("--cases", default=",".join(NET_CASES),
                    help="comma-separated; default the two networks; all: " + ",".join(case_defs()))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900, help="per process-pair launch, seconds")
    ap.add_argument("--out", default=os.path.join(HERE, "results_nets.json"))
    ap.add_argument("--max-extra", type=int, default=1,
                    help="extra process pairs (of --reps warm runs each) when the warm spread "
                         "max/min exceeds 1.25 (as in the original script); 0 = one pair only")
    ap.add_argument("--table", default=None, metavar="JSON",
                    help="only print the short table of an existing results file")
    ap.add_argument("--probe-delay-ms", type=float, default=0.0,
                    help="rounds probe: rerun the cases through 127.0.0.1 proxies that add this "
                         "one-way delay; results go to the 'round_probe' entry of --out")
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker)
    if a.table:
        with open(a.table) as f:
            return print_table(json.load(f))
    if a.probe_delay_ms > 0:
        return probe_rounds(a)

    import jax
    import spu

    results = dict(
        meta=dict(
            spu_version=spu.__version__, jax_version=jax.__version__,
            python=platform.python_version(), machine=platform.machine(),
            nproc=os.cpu_count(), protocol="CHEETAH", field="FM64", fxp_fraction_bits=FXP_BITS,
            cheetah_ot_kind="YACL_Ferret (default)", enable_mul_lsb_error=False,
            disable_matmul_pack=False, trunc_allow_msb_error="default (proto default)",
            link="brpc over TCP 127.0.0.1, two separate OS processes",
            script="peers/spu/bench_spu_nets.py (derived from /work/shared/peers/spu/bench_spu.py)",
            argv=sys.argv[1:],
            started=time.strftime("%Y-%m-%d %H:%M:%S"),
            loadavg_start=os.getloadavg(),
        ),
        cases=[])
    if os.path.exists(a.out):
        try:
            with open(a.out) as f:
                old = json.load(f)
            keep = [c for c in old.get("cases", []) if c["case"] not in a.cases.split(",")]
            results["cases"] = keep
            if "round_probe" in old:
                results["round_probe"] = old["round_probe"]
            results["meta"]["previous_runs"] = old.get("meta", {}).get("previous_runs", []) + [
                {k: old.get("meta", {}).get(k) for k in ("started", "finished", "loadavg_start")}]
        except Exception:
            pass
    with tempfile.TemporaryDirectory(prefix="spu_bench_") as tmpdir:
        for name in a.cases.split(","):
            rec = run_case(name, a.reps, a.timeout, tmpdir, max_extra=a.max_extra)
            rec["loadavg_after"] = os.getloadavg()
            order = list(case_defs().keys())
            results["cases"] = sorted([c for c in results["cases"] if c["case"] != name] + [rec],
                                      key=lambda c: order.index(c["case"]) if c["case"] in order else 99)
            results["meta"]["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
            with open(a.out, "w") as f:
                json.dump(results, f, indent=1, default=str)
    print()
    print_table(results)


if __name__ == "__main__":
    main()
