# SPDX-License-Identifier: Apache-2.0
# A reader in a process of its own, for test_buckets.py and
# tools/bench/buckets: a podfeed.Loader over PATH..., one line per batch
# ("B" and each row's CRC-32 of its bytes), its state saved to
# DIR/state-N.json every K batches ("S N FILE"), "END N" at the end, or
# "E" and the error when the loader fails (then exit 3 at once).  With
# --pause it waits for a line on stdin after its first state: the test
# stops the server then.  Usage:
#   bucket_reader.py [--state-dir DIR --every K [--pause]] [--resume FILE]
#                    [--memory-mib M] PATH...
import argparse
import json
import os
import sys
import zlib

import podfeed

TOKENS = "tokens:int32[64],label:int64[1]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--state-dir")
    ap.add_argument("--every", type=int, default=0)
    ap.add_argument("--pause", action="store_true")
    ap.add_argument("--resume")
    ap.add_argument("--memory-mib", type=float, default=64)
    a = ap.parse_args()
    state = json.load(open(a.resume)) if a.resume else None
    paths = a.paths if len(a.paths) > 1 else a.paths[0]
    n = 0
    try:
        loader = podfeed.Loader(paths, TOKENS, 8, cores=2, shuffle=True, seed=3,
                                memory_mib=a.memory_mib, state=state)
        for batch in loader:
            tokens, label = batch["tokens"], batch["label"]
            rows = [zlib.crc32(tokens[c][r].tobytes() + label[c][r].tobytes())
                    for c in range(tokens.shape[0]) for r in range(tokens.shape[1])]
            print("B", " ".join(f"{x:08x}" for x in rows), flush=True)
            n += 1
            if a.every and n % a.every == 0:
                path = os.path.join(a.state_dir, f"state-{n}.json")
                with open(path + ".tmp", "w") as f:
                    json.dump(loader.state_dict(), f)
                os.rename(path + ".tmp", path)
                print("S", n, path, flush=True)
                if a.pause and n == a.every:
                    sys.stdin.readline()
        loader.close()
    except podfeed.Error as e:
        print("E", str(e).replace("\n", " "), flush=True)
        # A read the storage client still holds keeps this process from
        # ending until the client answers (the kernel waits for it):
        # the test ends the client instead of waiting.
        os._exit(3)
    print("END", n, flush=True)


if __name__ == "__main__":
    main()
