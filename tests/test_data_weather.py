"""Weather CSV loader: thinning to hourly, scaling with training statistics, windows, errors."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from xpubench import data
from xpubench.data.weather import HORIZON
from xpubench.errors import UserError
from xpubench.workloads.base import WorkloadSpec

T = 16


def weather_spec(length: int = T) -> WorkloadSpec:
    return WorkloadSpec(name="weather_gru", title="t", dataset="weather", input_shape=(length, 20),
                        input_kind="series", target_kind="series", num_outputs=3, loss="mse", metric="mse",
                        optimizer="rmsprop", learning_rate=1e-3, batch_sizes=(32,), quick_batch_size=32,
                        epochs=1, train_samples=100, eval_samples=100, target_shape=(length, 3))


def frame(hours: int, per_hour: int = 1) -> pd.DataFrame:
    n = hours * per_hour
    stamps = pd.date_range("2009-01-01 00:10", periods=n, freq=f"{60 // per_hour}min")
    t = np.arange(n, dtype=float)
    return pd.DataFrame({
        "Date Time": stamps.strftime("%d.%m.%Y %H:%M:%S"),
        "p (mbar)": 1000 + t,
        "T (degC)": np.sin(t / 7.0) * 10,
        "rh (%)": 50 + (t % 13),
        "wv (m/s)": np.full(n, 3.0),
    })


def test_weather_windows_and_scaling(tmp_path: Path) -> None:
    frame(300).to_csv(tmp_path / "jena.csv", index=False)
    ds = data.load_real(weather_spec(), tmp_path)
    assert ds.x_train.shape[1:] == (T, 4) and ds.y_train.shape[1:] == (T, 3)
    assert ds.x_train.dtype == np.float32 and ds.y_test.dtype == np.float32
    for arr in (ds.x_train, ds.y_train, ds.x_test, ds.y_test):
        assert arr.min() >= 0.0 and arr.max() <= 1.0
    cut = 240                                  # 80% of 300 hours train
    p = (1000 + np.arange(300) - 1000) / (cut - 1)       # pressure scaled by training min/max
    np.testing.assert_allclose(ds.x_train[1, :, 0], p[2:2 + T], rtol=1e-6)     # stride T // 8 = 2
    np.testing.assert_allclose(ds.y_train[1, :, 0], p[2 + HORIZON:2 + HORIZON + T], rtol=1e-6)
    assert (ds.x_train[..., 3] == 0).all()     # a constant signal scales to 0
    assert len(ds.x_train) == len(range(0, cut - T - HORIZON + 1, 2))


def test_weather_ten_minute_rows_thinned_and_zip(tmp_path: Path) -> None:
    df = frame(300, per_hour=6)
    with zipfile.ZipFile(tmp_path / "jena_climate_2009_2016.csv.zip", "w") as zf:
        zf.writestr("jena_climate_2009_2016.csv", df.to_csv(index=False))
    ds = data.load_real(weather_spec(), tmp_path)
    assert "thinned to hourly" in ds.source and "(unverified)" in ds.source     # not the published size
    assert ds.x_train.shape[1:] == (T, 4)
    hourly = df.iloc[5::6]                  # rows on the full hour (the first is 01:00)
    assert hourly.iloc[0, 0] == "01.01.2009 01:00:00" and "300 hourly rows" in ds.source
    p = hourly["p (mbar)"].to_numpy()
    np.testing.assert_allclose(ds.x_train[0, :, 0], (p[:T] - p[0]) / (p[239] - p[0]), rtol=1e-6)


def test_weather_targets_option(tmp_path: Path) -> None:
    frame(300).to_csv(tmp_path / "w.csv", index=False)
    ds = data.load_real(weather_spec(), tmp_path / "w.csv", targets=["rh (%)"])
    assert ds.y_train.shape[1:] == (T, 1)
    with pytest.raises(UserError, match="has no column 'nope' to predict"):
        data.load_real(weather_spec(), tmp_path / "w.csv", targets=["T (degC)", "nope"])
    with pytest.raises(UserError, match="dataset weather has no option colour"):
        data.load_real(weather_spec(), tmp_path / "w.csv", colour="red")


def test_weather_bad_files(tmp_path: Path) -> None:
    df = frame(300)
    df["rh (%)"] = df["rh (%)"].astype(object)
    df.loc[7, "rh (%)"] = "n/a?"
    df.to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(UserError, match=r"column 'rh \(%\)' is not numeric \(e.g. 'n/a\?' in line 9\)"):
        data.load_real(weather_spec(), tmp_path / "a.csv")
    df = frame(300)
    df.loc[3, "T (degC)"] = np.nan
    df.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(UserError, match="has 1 missing value"):
        data.load_real(weather_spec(), tmp_path / "b.csv")
    frame(60).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(UserError, match="has 60 hourly rows; at least 200 are needed"):
        data.load_real(weather_spec(), tmp_path / "c.csv")
    (tmp_path / "d.csv").write_text("")
    with pytest.raises(UserError, match="is not a readable CSV file"):
        data.load_real(weather_spec(), tmp_path / "d.csv")
    with pytest.raises(UserError, match="holds several CSV files"):
        data.load_real(weather_spec(), tmp_path)
