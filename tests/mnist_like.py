#!/usr/bin/env python3
"""tests/mnist_like.py DIR: writes a learnable stand-in for MNIST into DIR, the
four IDX files swept-train reads, as trainer/test_util.h makes it in C++:
class k lights row 2k+4 over noise; 600 training and 100 test images, seeded,
so every run writes the same bytes. For the shell tests that run swept-train
as a trial without the real data set."""
import os
import random
import struct
import sys

out = sys.argv[1]
os.makedirs(out)
rng = random.Random(5)


def write(n, images, labels):
    pixels, ys = bytearray(), bytearray()
    for _ in range(n):
        y = rng.randrange(10)
        img = bytearray(rng.randrange(60) for _ in range(784))
        for x in range(4, 24):
            img[(2 * y + 4) * 28 + x] = 200 + rng.randrange(56)
        pixels += img
        ys.append(y)
    with open(os.path.join(out, images), "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + bytes(pixels))
    with open(os.path.join(out, labels), "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(ys))


write(600, "train-images-idx3-ubyte", "train-labels-idx1-ubyte")
write(100, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
