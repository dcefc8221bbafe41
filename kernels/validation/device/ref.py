# Independent references on the same GPU: PyTorch's device-to-device copy, pinned host<->device
# copies, and its cuBLAS bf16/fp16 matmul at the probe's default shape.
import json, torch, time
d = torch.device("cuda")
def timed(fn, n):
    for _ in range(3): fn()
    torch.cuda.synchronize(); s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize(); return s.elapsed_time(e) / 1e3 / n
out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
n = 1 << 30
x = torch.empty(n, dtype=torch.uint8, device=d); y = torch.empty_like(x)
t = timed(lambda: y.copy_(x), 50)
out["d2d_copy_gbps_read_plus_write"] = 2 * n / t / 1e9
out["d2d_copy_gbps_bytes_copied"] = n / t / 1e9
h = torch.empty(1 << 28, dtype=torch.uint8).pin_memory(); g = torch.empty(1 << 28, dtype=torch.uint8, device=d)
out["h2d_pinned_gbps"] = (1 << 28) / timed(lambda: g.copy_(h, non_blocking=True), 20) / 1e9
out["d2h_pinned_gbps"] = (1 << 28) / timed(lambda: h.copy_(g, non_blocking=True), 20) / 1e9
for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
    m = 16384
    a = torch.randn(m, m, device=d, dtype=dt); b = torch.randn(m, m, device=d, dtype=dt)
    t = timed(lambda: torch.mm(a, b), 20)
    out[f"matmul_{name}_16384_tflops"] = 2 * m**3 / t / 1e12
print(json.dumps(out))
