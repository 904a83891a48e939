#!/usr/bin/python3
"""Evaluate the demo dipole-inversion network on the numerical head phantom.

Reads the phantom's NIfTI-1 files with numpy (header parsed here), runs the network
whole-volume (each axis zero-padded to a multiple of 8, the smaller half of the padding on
the low side; cropped back; multiplied by the mask) and prints Pearson r and RMSE inside the
mask. The weights come from the training checkpoint (the same weights as the exported ONNX).

    tessera_phantom --dims 160 160 160 --seed 1 --noise 0 \
        --field-out /tmp/ph/field.nii --chi-out /tmp/ph/chi.nii --mask-out /tmp/ph/mask.nii
    /usr/bin/python3 scripts/eval_demo_net.py --ckpt /tmp/demo/ckpt.pt \
        --field /tmp/ph/field.nii --chi /tmp/ph/chi.nii --mask /tmp/ph/mask.nii

or let the script run the phantom tool itself:

    /usr/bin/python3 scripts/eval_demo_net.py --ckpt /tmp/demo/ckpt.pt \
        --phantom build/demo-native/tessera_phantom --dims 160 160 160 --seed 1 --noise 0
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_demo_net import UNet3D  # noqa: E402

NIFTI_DTYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4"}


def read_nifti(path):
    """Minimal NIfTI-1 (.nii) reader: returns (array [x,y,z] float64 or raw, pixdim[1:4])."""
    raw = open(path, "rb").read()
    if np.frombuffer(raw, "<i4", 1, 0)[0] == 348:
        e = "<"
    elif np.frombuffer(raw, ">i4", 1, 0)[0] == 348:
        e = ">"
    else:
        raise ValueError(f"{path}: not a NIfTI-1 file (sizeof_hdr != 348)")
    dim = np.frombuffer(raw, e + "i2", 8, 40)
    datatype = int(np.frombuffer(raw, e + "i2", 1, 70)[0])
    pixdim = np.frombuffer(raw, e + "f4", 8, 76)
    vox_offset = int(np.frombuffer(raw, e + "f4", 1, 108)[0])
    slope, inter = np.frombuffer(raw, e + "f4", 2, 112)
    if datatype not in NIFTI_DTYPES:
        raise ValueError(f"{path}: unsupported datatype {datatype}")
    nd = int(dim[0])
    shape = [int(d) for d in dim[1:1 + nd]]
    while len(shape) > 3 and shape[-1] == 1:
        shape.pop()
    if len(shape) != 3:
        raise ValueError(f"{path}: expected a 3D volume, got dims {shape}")
    n = int(np.prod(shape))
    data = np.frombuffer(raw, e + NIFTI_DTYPES[datatype], n, vox_offset)
    data = data.reshape(shape, order="F")  # x fastest on disk -> array indexed [x, y, z]
    if slope not in (0.0, 1.0) or inter != 0.0:
        if slope != 0.0:
            data = data * slope + inter
    return data, pixdim[1:4].copy()


def pad_to(n, div):
    total = (-n) % div
    lo = total // 2  # smaller half on the low side
    return lo, total - lo


def run_whole_volume(model, field, mask, div=8):
    """field, mask: numpy [x,y,z]. Input masked field; output chi * mask."""
    f = (field * mask).astype(np.float32)
    pads = [pad_to(n, div) for n in f.shape]
    fp = np.pad(f, pads)
    x = torch.from_numpy(np.ascontiguousarray(fp))[None, None]  # [1,1,X,Y,Z], z fastest
    with torch.no_grad():
        y = model(x)[0, 0].numpy()
    sl = tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, f.shape))
    return y[sl] * mask


def metrics(pred, truth, mask):
    m = mask > 0
    p = pred[m].astype(np.float64)
    t = truth[m].astype(np.float64)
    r = np.corrcoef(p, t)[0, 1]
    rmse = float(np.sqrt(np.mean((p - t) ** 2)))
    d = (p - t) - np.mean(p - t)  # after removing the mean offset inside the mask
    return float(r), rmse, float(np.sqrt(np.mean(d ** 2))), float(np.mean(p - t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", default="/tmp/demo/ckpt.pt")
    ap.add_argument("--field")
    ap.add_argument("--chi")
    ap.add_argument("--mask")
    ap.add_argument("--phantom", help="path of tessera_phantom; runs it into a temp dir")
    ap.add_argument("--dims", type=int, nargs=3, default=[160, 160, 160])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.0)
    ap.add_argument("--save-pred", help="write the prediction as .npy ([x,y,z])")
    args = ap.parse_args()

    torch.set_num_threads(1)
    tmp = None
    if args.phantom:
        tmp = tempfile.mkdtemp(prefix="tessera-eval-")
        args.field, args.chi, args.mask = (os.path.join(tmp, n) for n in
                                           ("field.nii", "chi.nii", "mask.nii"))
        cmd = [args.phantom, "--dims", *map(str, args.dims), "--seed", str(args.seed),
               "--noise", str(args.noise), "--field-out", args.field, "--chi-out", args.chi,
               "--mask-out", args.mask]
        print("running:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    if not (args.field and args.chi and args.mask):
        ap.error("give --field, --chi and --mask, or --phantom")

    field, vox = read_nifti(args.field)
    chi, _ = read_nifti(args.chi)
    mask, _ = read_nifti(args.mask)
    mask = (mask > 0).astype(np.float32)
    print(f"volume {field.shape}, voxel {vox.tolist()} mm, mask voxels {int(mask.sum())}, "
          f"field in mask [{field[mask > 0].min():.4f}, {field[mask > 0].max():.4f}] ppm, "
          f"chi in mask [{chi[mask > 0].min():.4f}, {chi[mask > 0].max():.4f}] ppm", flush=True)
    if not np.allclose(vox, 1.0, atol=1e-3):
        print("warning: the network was trained for 1 mm isotropic voxels", flush=True)

    ck = torch.load(args.ckpt, map_location="cpu")
    a = ck.get("args", {})
    model = UNet3D(a.get("base", 16), a.get("levels", 3), a.get("kernel", 3))
    model.load_state_dict(ck["model"])
    model.eval()
    t = time.time()
    pred = run_whole_volume(model, field.astype(np.float32), mask, 2 ** model.levels)
    dt = time.time() - t
    r, rmse, rmse0, offset = metrics(pred, chi, mask)
    print(f"checkpoint step {ck.get('step')}; inference {dt:.1f} s", flush=True)
    print(f"Pearson r (in mask) = {r:.4f}", flush=True)
    print(f"RMSE (in mask)      = {rmse:.5f} ppm  (truth std in mask "
          f"{chi[mask > 0].std():.5f} ppm)", flush=True)
    print(f"mean offset (pred - truth, in mask) = {offset:+.5f} ppm; RMSE after removing it = "
          f"{rmse0:.5f} ppm", flush=True)
    if args.save_pred:
        np.save(args.save_pred, pred.astype(np.float32))
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
