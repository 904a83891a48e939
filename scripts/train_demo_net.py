#!/usr/bin/python3
"""Train Tessera's small demo dipole-inversion network and export it to ONNX.

Reproducible (fixed seeds, fixed step count, one CPU thread). Needs only Debian's
python3-torch (1.13) and python3-numpy; run it with /usr/bin/python3.

    /usr/bin/python3 scripts/train_demo_net.py --steps 1600 --ckpt /tmp/demo/ckpt.pt \
        --onnx web/models/demo-unet.onnx

Conventions of the network (see scripts/train_demo_net.md):
  * input  "field": local field in ppm, f32 [1, 1, X, Y, Z], X, Y, Z multiples of 8, the field
    multiplied by the brain mask (zero outside); B0 along the volume's third axis (z);
    1 mm isotropic voxels.
  * output "chi": susceptibility in ppm, same shape; multiply by the mask afterwards.
  * Layout: axis 2 is the volume's x, axis 4 (z) is fastest in memory. A NIfTI volume stored
    x-fastest becomes this tensor by a reorder of memory (numpy order='F' reshape to [x,y,z]),
    never a permutation of axes.

Training data are random synthetic patches made on the fly (never the test head phantom):
piecewise-constant ellipsoids, small blobs and thin curved tubes inside a random smooth mask,
the local field from the dipole model D = 1/3 - kz^2/|k|^2, D(0) = 0, computed on a 2x
zero-padded grid (no wrap-around), then a random crop is taken as the training window, so the
window's field also holds contributions of sources just outside it (as in a tiled run).
"""
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# Fixed in-graph scaling so that the network works in ppm at its interface while its
# internal activations are O(1).
IN_SCALE = 10.0
OUT_SCALE = 0.1


# --------------------------------------------------------------------------------------
# Network
# --------------------------------------------------------------------------------------
def conv_block(cin, cout, kernel=3):
    return nn.Sequential(
        nn.Conv3d(cin, cout, kernel, padding=kernel // 2), nn.LeakyReLU(0.1, inplace=True),
        nn.Conv3d(cout, cout, kernel, padding=kernel // 2), nn.LeakyReLU(0.1, inplace=True))


class UNet3D(nn.Module):
    """Plain 3D U-Net: `levels` 2x max-poolings (divisor 2^levels), ConvTranspose3d decoder, skip
    concatenation, kernel^3 'same' convolutions with LeakyReLU(0.1), no normalisation layers,
    final 1x1x1 convolution. Input and output in ppm (fixed scaling inside the graph).
    The demo network is levels 3, kernel 3, base 16; the tiling-fidelity study's second network
    levels 2 (a shorter reach); the trained deep network levels 4, kernel 5, base 8 (QSMnet's
    shape). Modules are made in the order enc1.., bott, up/dec from the deepest, out, so that a
    seed gives the same weights as the earlier fixed-depth classes did."""

    def __init__(self, base=16, levels=3, kernel=3):
        super().__init__()
        c = [base * 2 ** i for i in range(levels + 1)]
        self.levels = levels
        for i in range(levels):
            setattr(self, f"enc{i + 1}", conv_block(c[i - 1] if i else 1, c[i], kernel))
        self.bott = conv_block(c[levels - 1], c[levels], kernel)
        for i in range(levels, 0, -1):
            setattr(self, f"up{i}", nn.ConvTranspose3d(c[i], c[i - 1], 2, stride=2))
            setattr(self, f"dec{i}", conv_block(2 * c[i - 1], c[i - 1], kernel))
        self.out = nn.Conv3d(c[0], 1, 1)
        self.pool = nn.MaxPool3d(2)

    def forward(self, field):
        x = field * IN_SCALE
        skips = []
        for i in range(self.levels):
            x = getattr(self, f"enc{i + 1}")(self.pool(x) if i else x)
            skips.append(x)
        x = self.bott(self.pool(x))
        for i in range(self.levels, 0, -1):
            x = getattr(self, f"dec{i}")(torch.cat([getattr(self, f"up{i}")(x), skips[i - 1]], 1))
        return self.out(x) * OUT_SCALE


# --------------------------------------------------------------------------------------
# Dipole forward model
# --------------------------------------------------------------------------------------
def dipole_kernel_rfft(n, voxel=(1.0, 1.0, 1.0)):
    """D(k) = 1/3 - kz^2/|k|^2 on the rfftn grid of an n^3 volume, B0 along axis 2 (z)."""
    kx = torch.fft.fftfreq(n, voxel[0])
    ky = torch.fft.fftfreq(n, voxel[1])
    kz = torch.fft.rfftfreq(n, voxel[2])
    KX, KY, KZ = torch.meshgrid(kx, ky, kz, indexing="ij")
    k2 = KX ** 2 + KY ** 2 + KZ ** 2
    D = 1.0 / 3.0 - KZ ** 2 / torch.where(k2 == 0, torch.ones_like(k2), k2)
    D[0, 0, 0] = 0.0
    return D


def dipole_field(chi, D, npad):
    """Local field (ppm) of chi [B, G, G, G], computed on an npad^3 zero-padded grid."""
    g = chi.shape[-1]
    big = chi.new_zeros(chi.shape[0], npad, npad, npad)
    big[:, :g, :g, :g] = chi
    f = torch.fft.irfftn(torch.fft.rfftn(big, dim=(-3, -2, -1)) * D, s=(npad, npad, npad),
                         dim=(-3, -2, -1))
    return f[:, :g, :g, :g].contiguous()


# --------------------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------------------
class Synth:
    """Random brain-like susceptibility volumes of size G^3 and their local fields."""

    def __init__(self, G, seed):
        self.G = G
        self.gen = torch.Generator().manual_seed(seed)
        ax = torch.arange(G, dtype=torch.float32)
        self.X, self.Y, self.Z = torch.meshgrid(ax, ax, ax, indexing="ij")
        self.D = dipole_kernel_rfft(2 * G)

    def u(self, a, b, n=()):
        return a + (b - a) * torch.rand(n, generator=self.gen)

    def ri(self, a, b):
        return int(torch.randint(a, b + 1, (1,), generator=self.gen))

    def rot(self):
        q = torch.randn(4, generator=self.gen)
        q = q / q.norm()
        w, x, y, z = q.tolist()
        return torch.tensor([
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])

    def ellipsoid_q(self, c, r, R):
        """Quadratic form value ((p-c) R / r)^2 summed, on the whole grid."""
        dx, dy, dz = self.X - c[0], self.Y - c[1], self.Z - c[2]
        q = 0
        for j in range(3):
            a = (dx * R[0, j] + dy * R[1, j] + dz * R[2, j]) / r[j]
            q = q + a * a
        return q

    def smooth_noise(self, scale):
        """Low-frequency random field, roughly unit amplitude."""
        G = self.G
        n = max(2, int(round(G / scale)))
        c = torch.randn(1, 1, n, n, n, generator=self.gen)
        s = F.interpolate(c, size=(G, G, G), mode="trilinear", align_corners=True)[0, 0]
        return s / (s.std() + 1e-6)

    def mask(self):
        G = self.G
        c = [G / 2 + self.u(-0.12, 0.12).item() * G for _ in range(3)]
        r = [self.u(0.22, 0.62).item() * G for _ in range(3)]
        q = self.ellipsoid_q(c, r, self.rot()).sqrt()
        # wobbly boundary
        q = q + 0.08 * self.smooth_noise(G / 5)
        m = q < 1.0
        if self.u(0, 1).item() < 0.3:  # a few interior holes (ventricle-like gaps in the mask)
            for _ in range(self.ri(1, 2)):
                cc = [G / 2 + self.u(-0.2, 0.2).item() * G for _ in range(3)]
                rr = [self.u(2, 6).item() for _ in range(3)]
                m &= self.ellipsoid_q(cc, rr, self.rot()) >= 1.0
        return m

    def tube(self, chi, val):
        """Thin curved tube (quadratic Bezier), radius 0.6..2 voxels."""
        G = self.G
        P = [torch.tensor([self.u(0, G).item() for _ in range(3)]) for _ in range(3)]
        rad = self.u(0.6, 2.0).item()
        t = torch.linspace(0, 1, 3 * G)
        pts = ((1 - t)[:, None] ** 2) * P[0] + (2 * (1 - t) * t)[:, None] * P[1] + \
            (t[:, None] ** 2) * P[2]
        lo = (pts.min(0).values - rad - 1).clamp(0, G - 1).long()
        hi = (pts.max(0).values + rad + 2).clamp(1, G).long()
        sx, sy, sz = slice(lo[0], hi[0]), slice(lo[1], hi[1]), slice(lo[2], hi[2])
        grid = torch.stack([self.X[sx, sy, sz], self.Y[sx, sy, sz], self.Z[sx, sy, sz]], -1)
        g = grid.reshape(-1, 3)
        d2 = torch.full((g.shape[0],), 1e9)
        for k in range(0, pts.shape[0], 16):
            d2 = torch.minimum(d2, torch.cdist(g, pts[k:k + 16]).min(1).values ** 2)
        inside = (d2 <= rad * rad).reshape(grid.shape[:3])
        sub = chi[sx, sy, sz]
        sub[inside] = val

    def blob(self, chi, rmin, rmax, vmin, vmax, smooth=False):
        G = self.G
        c = [self.u(0.1, 0.9).item() * G for _ in range(3)]
        r = [self.u(rmin, rmax).item() for _ in range(3)]
        q = self.ellipsoid_q(c, r, self.rot())
        v = self.u(vmin, vmax).item()
        if smooth:  # soft-edged blob, additive
            chi += v * torch.exp(-q)
        else:
            chi[q < 1.0] = v

    def sample(self):
        """Returns chi [G,G,G], mask [G,G,G] (bool)."""
        G = self.G
        m = self.mask()
        chi = torch.full((G, G, G), self.u(-0.03, 0.03).item())
        # large 'tissue' regions (white/grey matter-like contrast), piecewise constant
        for _ in range(self.ri(3, 10)):
            self.blob(chi, 4, G * 0.3, -0.08, 0.1)
        # deep-grey-matter-like nuclei
        for _ in range(self.ri(0, 5)):
            self.blob(chi, 2.5, 10, 0.05, 0.3)
        # small blobs of any value (haemorrhage / calcification-like)
        for _ in range(self.ri(0, 10)):
            self.blob(chi, 1, 4, -0.1, 0.45)
        # veins
        for _ in range(self.ri(0, 6)):
            self.tube(chi, self.u(0.15, 0.45).item())
        # soft blobs and a little smooth variation
        for _ in range(self.ri(0, 3)):
            self.blob(chi, 3, 12, -0.05, 0.1, smooth=True)
        chi += self.u(0, 0.015).item() * self.smooth_noise(G / 4)
        chi = chi.clamp(-0.1, 0.45) * m
        return chi, m

    def batch(self, B, P, noise_max):
        """B training windows of size P^3: (masked field, chi, mask) each [B,1,P,P,P]."""
        chis, masks = [], []
        for _ in range(B):
            c, m = self.sample()
            chis.append(c)
            masks.append(m)
        chi = torch.stack(chis)
        mask = torch.stack(masks)
        field = dipole_field(chi, self.D, 2 * self.G)
        if noise_max > 0:
            sig = self.u(0, noise_max, (B, 1, 1, 1))
            field = field + sig * torch.randn(field.shape, generator=self.gen)
        out_f, out_c, out_m = [], [], []
        for b in range(B):
            o = [self.ri(0, self.G - P) for _ in range(3)]
            s = (slice(o[0], o[0] + P), slice(o[1], o[1] + P), slice(o[2], o[2] + P))
            mm = mask[b][s].float()
            out_f.append(field[b][s] * mm)
            out_c.append(chi[b][s] * mm)
            out_m.append(mm)
        return (torch.stack(out_f)[:, None], torch.stack(out_c)[:, None],
                torch.stack(out_m)[:, None])


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------
def lr_at(step, steps, lr0, warm=50, lr_min_frac=0.02):
    if step < warm:
        return lr0 * (step + 1) / warm
    p = (step - warm) / max(1, steps - warm)
    return lr0 * (lr_min_frac + (1 - lr_min_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def export_onnx(model, path, opset):
    model.eval()
    m = max(8, 2 ** model.levels)
    dummy = torch.zeros(1, 1, 4 * m, 5 * m, 6 * m)  # multiples of the divisor (32, 40, 48 up to 3 levels)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    axes = {2: "X", 3: "Y", 4: "Z"}
    torch.onnx.export(model, dummy, path, input_names=["field"], output_names=["chi"],
                      dynamic_axes={"field": axes, "chi": axes}, opset_version=opset,
                      do_constant_folding=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1600)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--patch", type=int, default=48, help="training window edge (voxels)")
    ap.add_argument("--gen-size", type=int, default=64, help="synthetic volume edge")
    ap.add_argument("--base", type=int, default=16, help="channels at full resolution")
    ap.add_argument("--levels", type=int, default=3, choices=(2, 3, 4),
                    help="poolings: 3 (the demo network, divisor 8), 2 (divisor 4, shorter reach) or 4 "
                    "(divisor 16, the deep network)")
    ap.add_argument("--kernel", type=int, default=3, choices=(3, 5), help="convolution kernel edge")
    ap.add_argument("--stop-at", type=int, default=None,
                    help="stop after this many steps of the --steps schedule (a briefly trained stand-in)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--noise", type=float, default=0.002, help="max field noise sigma (ppm)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--ckpt", default="/tmp/demo/ckpt.pt")
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--onnx", default="web/models/demo-unet.onnx")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--export-only", action="store_true",
                    help="skip training; export the weights in --ckpt")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    model = UNet3D(args.base, args.levels, args.kernel)
    nparam = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    synth = Synth(args.gen_size, args.seed + 1)
    step, elapsed, ema = 0, 0.0, None
    if os.path.exists(args.ckpt):
        ck = torch.load(args.ckpt)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        synth.gen.set_state(ck["gen"])
        torch.set_rng_state(ck["torch_rng"])
        step, elapsed, ema = ck["step"], ck["elapsed"], ck["ema"]
        print(f"resumed from {args.ckpt} at step {step} ({elapsed:.0f} s)", flush=True)
    print(f"UNet3D base {args.base}, {args.levels} levels, kernel {args.kernel}: {nparam} parameters", flush=True)

    def save():
        tmp = args.ckpt + ".tmp"
        os.makedirs(os.path.dirname(os.path.abspath(args.ckpt)), exist_ok=True)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                    "gen": synth.gen.get_state(), "torch_rng": torch.get_rng_state(),
                    "step": step, "elapsed": elapsed, "ema": ema, "args": vars(args)}, tmp)
        os.replace(tmp, args.ckpt)

    if not args.export_only:
        model.train()
        t_last = time.time()
        last = args.steps if args.stop_at is None else min(args.steps, args.stop_at)
        while step < last:
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args.steps, args.lr)
            field, chi, m = synth.batch(args.batch, args.patch, args.noise)
            pred = model(field) * m
            n = m.sum().clamp(min=1)
            err = (pred - chi) * 10.0  # loss in units of 0.1 ppm
            loss = (err.abs().sum() + err.square().sum()) / n
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            now = time.time()
            elapsed += now - t_last
            t_last = now
            ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
            if step % 20 == 0 or step == args.steps:
                print(f"step {step:5d} loss {loss.item():.4f} ema {ema:.4f} "
                      f"lr {opt.param_groups[0]['lr']:.2e} t {elapsed:.0f}s", flush=True)
            if step % args.ckpt_every == 0 or step == last:
                save()
        print(f"done: {step} steps, {elapsed:.0f} s training wall time, final ema loss "
              f"{ema:.4f}", flush=True)

    export_onnx(model, args.onnx, args.opset)
    print(f"exported {args.onnx} ({os.path.getsize(args.onnx)} bytes)", flush=True)


if __name__ == "__main__":
    main()
