"""Trains the digits classifier: `python train.py --config configs/hparams.yaml`."""

import argparse
import os

import tensorflow as tf
import yaml

from data.input_pipeline import dataset
from model import build_model
from utils.auth import storage_client


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/hparams.yaml")
    args = parser.parse_args()
    with open(args.config) as f:
        hparams = yaml.safe_load(f)
    # credentials come from the environment (a mounted Secret), never from this repo
    api_key = os.environ.get("WANDB_API_KEY")
    db_password = os.environ["METRICS_DB_PASSWORD"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = build_model(hparams["model"])
        model.compile(
            optimizer=tf.keras.optimizers.Adam(hparams["optimizer"]["learning_rate"]),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )
    model.fit(dataset(hparams["data"]), epochs=hparams["epochs"], steps_per_epoch=hparams["steps_per_epoch"])
    model.save(os.path.join(os.environ.get("TFK8S_MODEL_DIR", "/tmp/model"), "final.keras"))
    if api_key:
        print("logged to wandb; metrics db user", hparams["metrics"]["user"], "password set:", bool(db_password))
    storage_client().bucket(hparams["data"]["bucket"]).blob("done").upload_from_string("ok")


if __name__ == "__main__":
    main()
