# SPDX-License-Identifier: Apache-2.0
"""A language model's input on a pod, in JAX: a packed mixture of three
text sources (their tokens weighed by docs/recipes.md's weights), each
host's rows handed to JAX as global arrays sharded over the pod's
devices, and the loader's state saved beside the model's parameters so
that a restart goes on with exactly the next batch.

    python3 docs/recipes/lm_jax.py CKPT WEB CODE BOOKS [STEPS]

Every host of the pod runs it (jax.distributed.initialize() first on a
multi-host pod); podfeed takes the host's index and count from JAX.
Without jax installed, `--check` runs everything but JAX: the loader, the
arrays this recipe hands to jax.make_array_from_process_local_data (their
names, shapes and dtypes), and the checkpoint and its resume."""
import json
import os
import sys

import numpy as np

import podfeed
import podfeed.jax

SPEC = "tokens:int32[*],targets:int32[*]"
LENGTH = 512            # a packed row's tokens
PER_CORE_BATCH = 4      # packed rows a core a step
VOCAB = 32000


def loader(web, code, books, cores, state=None, max_steps=None):
    """The packed mixture: 70% web, 20% code, 10% books of the tokens,
    first_fit into rows of LENGTH, shuffled, one epoch of web."""
    sources = [podfeed.Source(web, 0.7, "web"), podfeed.Source(code, 0.2, "code"),
               podfeed.Source(books, 0.1, "books")]
    return podfeed.Loader(sources, SPEC, per_core_batch=PER_CORE_BATCH, cores=cores,
                          pack_length=LENGTH, mix_unit="tokens", shuffle=True, seed=0,
                          state=state, max_steps=max_steps)


def host_arrays(batch):
    """What this host hands to JAX: each feature's rows of this host as
    jax.make_array_from_process_local_data wants them, [cores x
    per_core_batch, LENGTH], C-contiguous, core 0's rows first."""
    return {name: podfeed.jax.local_data(batch, name) for name in batch.keys()}


def save(path, params, data_state, step):
    """The checkpoint: the model's parameters and the loader's state,
    written together (a restart takes both or neither)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"step": step, "data": data_state,
                   "params": {k: np.asarray(v).tolist() for k, v in params.items()}}, f)
    os.replace(tmp, path)


def load(path):
    with open(path) as f:
        return json.load(f)


def train(ckpt, web, code, books, steps):
    try:
        import jax
        import jax.numpy as jnp
    except ModuleNotFoundError:
        sys.exit("lm_jax.py: jax is not installed: install it to train, or pass --check "
                 "to check what the loader hands to JAX")

    mesh = jax.sharding.Mesh(jax.devices(), ("data",))
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    dim = 64
    key = jax.random.PRNGKey(0)
    params = {"embed": jax.random.normal(key, (VOCAB, dim)) * 0.02,
              "out": jax.random.normal(key, (dim, VOCAB)) * 0.02}
    state, start = None, 0
    if os.path.exists(ckpt):
        saved = load(ckpt)
        params = {k: jnp.asarray(v) for k, v in saved["params"].items()}
        state, start = saved["data"], saved["step"]

    @jax.jit
    def step_fn(params, tokens, targets, segments):
        def loss_fn(p):
            logits = p["embed"][tokens % VOCAB] @ p["out"]
            logp = jax.nn.log_softmax(logits)
            nll = -jnp.take_along_axis(logp, (targets % VOCAB)[..., None], -1)[..., 0]
            mask = segments > 0               # the padding has no segment
            return (nll * mask).sum() / jnp.maximum(mask.sum(), 1)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        return {k: params[k] - 0.1 * grads[k] for k in params}, loss

    with loader(web, code, books, jax.local_device_count(), state,
                steps - start if steps > start else 1) as data:
        for i, batch in enumerate(data, start):
            arrays = podfeed.jax.global_arrays(batch, rows)
            params, loss = step_fn(params, arrays["tokens"], arrays["targets"],
                                   arrays["tokens_segment_ids"])
            if (i + 1) % 10 == 0 or i + 1 == steps:
                save(ckpt, params, data.state_dict(), i + 1)
                print(f"step {i + 1}: loss {float(loss):.3f}")


def check(ckpt, web, code, books, steps, cores=2):
    """Everything but JAX: the arrays handed to it each step, and the
    checkpoint's resume (the batches after it are the uninterrupted run's)."""
    def digest(arrays):
        return [a.tobytes() for _, a in sorted(arrays.items())]

    with loader(web, code, books, cores, max_steps=steps) as data:
        full = []
        for i, batch in enumerate(data):
            arrays = host_arrays(batch)
            for name, a in arrays.items():
                assert a.shape == (cores * PER_CORE_BATCH, LENGTH), (name, a.shape)
                assert a.dtype == np.int32 and a.flags.c_contiguous, name
            seg = arrays["tokens_segment_ids"]
            assert (arrays["tokens"][seg == 0] == 0).all(), "padding holds tokens"
            full.append(digest(arrays))
            if i + 1 == steps // 2:
                save(ckpt, {"w": np.zeros(2)}, data.state_dict(), i + 1)
    saved = load(ckpt)
    with loader(web, code, books, cores, saved["data"], steps - saved["step"]) as data:
        rest = [digest(host_arrays(b)) for b in data]
    assert rest == full[saved["step"]:], "the resumed batches are not the run's"
    print(f"checked {steps} steps: arrays for JAX of [{cores * PER_CORE_BATCH}, {LENGTH}] "
          f"int32 each, resumed at step {saved['step']} bit for bit")


def main(argv):
    checking = "--check" in argv
    args = [a for a in argv if a != "--check"]
    if len(args) not in (4, 5):
        sys.exit(__doc__)
    ckpt, web, code, books = args[:4]
    steps = int(args[4]) if len(args) == 5 else 100
    if checking:
        check(ckpt, web, code, books, steps)
    else:
        train(ckpt, web, code, books, steps)


if __name__ == "__main__":
    main(sys.argv[1:])
