"""Published dataset files (where to get them, their checksums), download on request, verification.

Nothing is downloaded unless the caller asks (``download=True``). A download goes to a temporary file
next to its destination, is checked against the published sha256 and only then moved into place.

Checksum sources (copied from published tables, never computed here):
- MNIST, Fashion-MNIST, CIFAR-10 binary, aclImdb_v1: the sha256 and sizes of TensorFlow Datasets'
  ``url_checksums`` files (mnist.txt, fashion_mnist.txt, cifar10.txt, imdb_reviews.txt); MNIST's
  uncompressed sha256 as listed with the shared test files (/work/shared/datasets/README.md for t10k)
  and in public MNIST download scripts for the train split.
- tiny-shakespeare ``input.txt`` (karpathy/char-rnn): sha256 as widely published for that file.
- Jena climate (``jena_climate_2009_2016.csv.zip``): no published checksum could be found, so it is
  size-checked only (13,568,290 bytes, as Keras' download log reports) and then format-checked.

Files already on disk are verified when their size equals the published size (a mismatch there is a
corrupt file: UserError naming it). A file of another size is not the published file (a smaller
sample, a re-compressed copy, another dataset in the same format): it is only format-checked, and the
loaders' ``source`` says "unverified". Gzip files are also accepted when their content matches the
published uncompressed checksum.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from xpubench.data.core import read_bytes
from xpubench.errors import DataUnavailable, UserError

CHUNK = 1 << 20
TIMEOUT_S = 60


@dataclass(frozen=True)
class Published:
    """One published file: mirrors, sha256 and size as published, and the same for its gunzipped content."""

    urls: tuple[str, ...]
    sha256: str | None
    size: int | None
    raw_sha256: str | None = None
    raw_size: int | None = None


def _idx(base_urls: tuple[str, ...], name: str, sha: str, size: int, raw_sha: str | None,
         raw_size: int) -> Published:
    return Published(tuple(b + name for b in base_urls), sha, size, raw_sha, raw_size)


_MNIST_URLS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
               "https://storage.googleapis.com/cvdf-datasets/mnist/")
_FASHION_URLS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)

PUBLISHED: dict[str, dict[str, Published]] = {
    "mnist": {
        "train-images-idx3-ubyte.gz": _idx(
            _MNIST_URLS, "train-images-idx3-ubyte.gz",
            "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9912422,
            "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db", 47040016),
        "train-labels-idx1-ubyte.gz": _idx(
            _MNIST_URLS, "train-labels-idx1-ubyte.gz",
            "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28881,
            "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5", 60008),
        "t10k-images-idx3-ubyte.gz": _idx(
            _MNIST_URLS, "t10k-images-idx3-ubyte.gz",
            "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1648877,
            "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", 7840016),
        "t10k-labels-idx1-ubyte.gz": _idx(
            _MNIST_URLS, "t10k-labels-idx1-ubyte.gz",
            "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4542,
            "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2", 10008),
    },
    "fashion_mnist": {
        "train-images-idx3-ubyte.gz": _idx(
            _FASHION_URLS, "train-images-idx3-ubyte.gz",
            "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84", 26421880, None, 47040016),
        "train-labels-idx1-ubyte.gz": _idx(
            _FASHION_URLS, "train-labels-idx1-ubyte.gz",
            "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845", 29515, None, 60008),
        "t10k-images-idx3-ubyte.gz": _idx(
            _FASHION_URLS, "t10k-images-idx3-ubyte.gz",
            "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073", 4422102, None, 7840016),
        "t10k-labels-idx1-ubyte.gz": _idx(
            _FASHION_URLS, "t10k-labels-idx1-ubyte.gz",
            "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5", 5148, None, 10008),
    },
    "cifar10": {
        "cifar-10-binary.tar.gz": Published(
            ("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",),
            "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd", 170052171),
    },
    "imdb": {
        "aclImdb_v1.tar.gz": Published(
            ("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",),
            "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe", 84125825),
    },
    "text": {
        "input.txt": Published(
            ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",),
            "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed", 1115394),
    },
    "weather": {
        "jena_climate_2009_2016.csv.zip": Published(
            ("https://storage.googleapis.com/tensorflow/tf-keras-datasets/jena_climate_2009_2016.csv.zip",),
            None, 13568290),
    },
}


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                digest.update(chunk)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    return digest.hexdigest()


def published(dataset: str, name: str) -> Published | None:
    """The published record for a file name of a dataset (a raw file maps to its .gz record)."""
    table = PUBLISHED.get(dataset, {})
    return table.get(name) or table.get(name + ".gz")


def verify(path: Path, dataset: str, content: bytes | None = None) -> str:
    """Check a file on disk against its published checksum: "verified", "unverified" or raise UserError.

    ``content`` is the file's uncompressed bytes where the caller already has them (saves a read).
    A file whose size differs from every published size is "unverified" (see the module docstring).
    """
    entry = published(dataset, path.name)
    if entry is None:
        return "unverified"
    whole = path.name in PUBLISHED[dataset]          # False: an uncompressed copy of a published .gz
    size = path.stat().st_size
    tried = False
    if whole and entry.size is not None and size == entry.size:
        if entry.sha256 is None:
            return "size-checked"
        if sha256_file(path) == entry.sha256:
            return "verified"
        tried = True
    if entry.raw_sha256 is not None and entry.raw_size is not None:
        if content is None and (size == entry.raw_size or path.suffix == ".gz"):
            content = read_bytes(path)
        if content is not None and len(content) == entry.raw_size:
            if sha256_bytes(content) == entry.raw_sha256:
                return "verified"
            tried = True
    if tried:
        raise UserError(f"{path} has the size of the published {dataset} file but not its sha256 "
                        f"(corrupt?): delete it and download it again")
    other = _published_elsewhere(path, dataset, size, content)
    if other is not None:
        raise UserError(f"{path} is the published {other} file, not {dataset}'s: keep each dataset in its "
                        f"own folder (DIR/{dataset}/)")
    return "unverified"


def _published_elsewhere(path: Path, dataset: str, size: int, content: bytes | None) -> str | None:
    """The other dataset whose published file (same name) this is, e.g. MNIST files read as Fashion-MNIST."""
    for other, table in PUBLISHED.items():
        entry = table.get(path.name) or table.get(path.name + ".gz")
        if other == dataset or entry is None:
            continue
        if path.name in table and entry.sha256 and size == entry.size and sha256_file(path) == entry.sha256:
            return other
        if (content is not None and entry.raw_sha256 and len(content) == entry.raw_size
                and sha256_bytes(content) == entry.raw_sha256):
            return other
    return None


def fetch(url: str, dest: Path, sha256: str | None, *, size: int | None = None, what: str | None = None,
          hint: str | None = None) -> Path:
    """Download ``url`` to ``dest``, checking sha256 (or at least size) before moving it into place.

    A network failure raises DataUnavailable: "cannot download WHAT (offline?): HINT"; so does a
    download whose checksum or size is not the published one (the partial file is removed).
    """
    what = what or dest.name
    hint = hint or f"put {dest.name} in {dest.parent} or pass --data-dir"
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    except OSError as exc:
        raise UserError(f"cannot write into {dest.parent} ({exc.strerror}): "
                        f"pass a writable --data-dir") from None
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    got = 0
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                    for chunk in iter(lambda: response.read(CHUNK), b""):
                        out.write(chunk)
                        digest.update(chunk)
                        got += len(chunk)
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError, EOFError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise DataUnavailable(f"cannot download {what} (offline?): {hint} [{reason}]") from None
        if sha256 is not None and digest.hexdigest() != sha256:
            raise DataUnavailable(f"download of {url} is not the published file (sha256 {digest.hexdigest()} "
                                  f"!= {sha256}); try again later, or {hint}")
        if sha256 is None and size is not None and got != size:
            raise DataUnavailable(f"download of {url} has {got} bytes, the published file {size}; "
                                  f"try again later, or {hint}")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def download_published(dataset: str, names: list[str], folder: Path, *,
                       hint: str | None = None) -> list[Path]:
    """Download the named published files of a dataset into ``folder`` (trying each mirror in turn)."""
    hint = hint or f"put {', '.join(names)} in {folder} or pass --data-dir"
    paths = []
    for name in names:
        entry = PUBLISHED[dataset][name]
        dest = folder / name
        last: DataUnavailable | None = None
        for url in entry.urls:
            try:
                paths.append(fetch(url, dest, entry.sha256, size=entry.size, what=dataset, hint=hint))
                last = None
                break
            except DataUnavailable as exc:
                last = exc
        if last is not None:
            raise last
    return paths


def missing(dataset: str, names: list[str], folder: Path, *, download: bool) -> DataUnavailable:
    """The error for published files that are not on disk (and were not to be downloaded)."""
    if download:
        return DataUnavailable(f"{dataset}: {', '.join(names)} still missing in {folder} after download")
    return DataUnavailable(f"{dataset} data not found: put {', '.join(names)} in {folder} "
                           f"or pass --data-dir, or add --download when online")
