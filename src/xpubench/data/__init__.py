"""Datasets: real loaders for the standard formats and synthetic data of the same shapes.

The contract every caller relies on (filled in by the modules of this package):

    Dataset(x_train, y_train, x_test, y_test, source)
    load_real(spec, data_dir, *, download=False, train_samples=None, eval_samples=None) -> Dataset
    synthetic(spec, train_samples, eval_samples, seed=0) -> Dataset

Arrays are numpy, already in the model's input format (see xpubench.workloads.base).
"""
