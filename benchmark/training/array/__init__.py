"""K runs of a grid trained as one array model (horizontal fusion, as in HFTA).

The runs' parameters live in one ``[K, D]`` tensor (each run's own parameters are views of its
row), their BatchNorm buffers in ``[K, ...]`` tensors; one forward (``torch.func.vmap``, which
lowers a convolution with batched weights to one grouped convolution, or a loop over the runs),
one backward of the summed mean losses and one SGD step with ``[K]`` learning rates, weight
decays and momenta. Everything else stays each run's own: its data order and augmentation, its
schedule, its method's pruning decisions (on its own views), its evaluation, checkpoint, record
and weights (:mod:`benchmark.training.array.fit`).
"""

# How the array's forward runs the K models (benchmark.training.array.stack says what each
# is). Here, without torch, so that the command line can name them in its help.
LAYOUTS = ("vmap", "loop", "grouped")
