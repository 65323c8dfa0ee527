#!/bin/sh
# Runs the training locally with the key the README makes (never committed).
set -eu
: "${GOOGLE_APPLICATION_CREDENTIALS:?set it to the path of your service-account key}"
export TF_CPP_MIN_LOG_LEVEL=2
exec python train.py --config "${1:-configs/hparams.yaml}"
