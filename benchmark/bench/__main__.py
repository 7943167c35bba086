"""``python -m benchmark.bench``: the training throughput benchmark (:mod:`.throughput`)."""

from benchmark.bench.throughput import main

if __name__ == "__main__":
    main()
