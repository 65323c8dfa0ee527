# One image for every role of a tfk8s cluster (chief, worker, ps, evaluator): the role comes
# from TF_CONFIG at run time, the program arguments from the pod's args.
#
#   docker build -t tfk8s/worker:dev .
#   GPU build:   docker build --build-arg 'TF_PACKAGE=tensorflow[and-cuda]>=2.21,<2.22' -t tfk8s/worker:gpu .
#   Offline, from a local base image, with the host's CA bundle for pip (mounted into the pip
#   steps only: it is never written into a layer):
#     docker build --secret id=pipcert,src=/etc/ssl/certs/ca-certificates.crt \
#       --build-arg BASE=tfk8s/python-base:3.11-bookworm -t tfk8s/worker:dev .
#
# RUN --mount needs BuildKit: the default builder since Docker 23; on Docker 20.10 set
# DOCKER_BUILDKIT=1. No `# syntax=` line on purpose: that would make BuildKit pull a frontend
# image, which an offline build cannot.
ARG BASE=python:3.11-slim-bookworm

# ---- build: install the training stack into /opt/venv, then cut what no task runs ----
FROM ${BASE} AS build

# Only what `python -m worker` needs: the `worker` extra of pyproject.toml (which pins
# tensorflow-cpu) plus tf-keras, and the worker/ package. Not [project].dependencies (kubernetes,
# jinja2, pydantic, PyYAML): those are the launcher's, which runs outside the cluster; the pods'
# other program, supervise.py (mounted from a ConfigMap), needs only the standard library.
# TF_PACKAGE, when set, replaces the extra's TensorFlow requirement, e.g. for the CUDA build.
# tf-keras is then installed to match whatever TensorFlow got installed, with --no-deps: it
# depends on `tensorflow`, which pip would otherwise download and write over tensorflow-cpu.
# The base image needs Python >= 3.11 (tomllib reads pyproject).
ARG TF_PACKAGE=

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# `python3` is /usr/local/bin/python3 in python:*-slim and Debian's /usr/bin/python3 (with
# python3-venv) in the offline base; the venv makes `python` the same interpreter in both.
# binutils (strip) stays in this stage: the runtime stage copies only the venv.
RUN python3 -m venv "$VIRTUAL_ENV" \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends binutils > /dev/null \
 && rm -rf /var/lib/apt/lists/*

# Dependencies before sources: this layer is rebuilt only when pyproject.toml or TF_PACKAGE
# changes, not when the code does.
WORKDIR /tmp/tfk8s-src
COPY pyproject.toml ./
RUN --mount=type=secret,id=pipcert,required=false \
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi \
 && python -c "import os, tomllib; project = tomllib.load(open('pyproject.toml', 'rb'))['project']; tf = os.environ.get('TF_PACKAGE'); deps = project['optional-dependencies']['worker']; print('\n'.join([d for d in deps if not (tf and d.startswith('tensorflow'))] + ([tf] if tf else [])))" > requirements.txt \
 && pip install -r requirements.txt \
 && tf_minor=$(python -c "import tensorflow as tf; print(tf.__version__.rsplit('.', 1)[0])") \
 && pip install --no-deps "tf-keras==$tf_minor.*" \
 && python -c "import tensorflow as tf, tf_keras; print('TensorFlow', tf.__version__, '+ tf_keras', tf_keras.__version__)"

# What every node would pull and no task runs (measured on 2.21: 1.99 GB -> see README "The
# worker image"): TensorFlow's C++ headers (287 MB, for compiling custom ops: build those FROM
# a full `pip install tensorflow`), libclang (62 MB, TensorFlow's build-time code generator),
# the debug symbols of TensorFlow's shared libraries (strip --strip-unneeded keeps every dynamic
# symbol; not the other wheels' libraries: auditwheel's patchelf leaves files that strip breaks),
# numpy's and h5py's own test suites, and scikit-learn with scipy (200 MB) once the built-in program's digits file
# is copied out: worker/examples/fashion_mnist.py reads it from /opt/tfk8s/data without them.
# The last check imports what a task imports, against the stripped libraries.
RUN site=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") \
 && mkdir -p /opt/tfk8s/data \
 && cp "$site/sklearn/datasets/data/digits.csv.gz" /opt/tfk8s/data/ \
 && pip uninstall -q -y scikit-learn scipy joblib threadpoolctl libclang \
 && rm -rf "$site/tensorflow/include" \
 && find "$site/tensorflow" -name '*.so*' -type f -exec strip --strip-unneeded {} + \
 && rm -rf "$site"/numpy/*/tests "$site"/numpy/tests "$site"/h5py/tests \
 && TF_USE_LEGACY_KERAS=1 python -c "import tensorflow as tf, tf_keras; tf.constant(1.0) + 1; print('stripped TensorFlow', tf.__version__, 'imports')"

# ---- runtime: the base, the pruned venv and the worker package ----
FROM ${BASE}
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    HOME=/home/tfk8s \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# HOME must be writable by the non-root user: Keras caches downloaded datasets in ~/.keras.
RUN mkdir -p /home/tfk8s \
 && chown 1000:1000 /home/tfk8s
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/tfk8s/data /opt/tfk8s/data

# The worker package alone, as source: no pip install of the project, which would bring the
# launcher and its templates along. A .pth file in the venv puts /opt/tfk8s on sys.path, so
# `python -m worker` works from any directory and for any user, and survives a PYTHONPATH the
# pod sets for its own program (an ENV PYTHONPATH would be replaced by it); its other lines
# start the Keras check and the exception check in every task of a program of your own
# (worker/keras_check.py, worker/exception_check.py: stdlib only, no-ops for the built-in worker
# and for processes without TF_CONFIG). compileall writes
# the bytecode now: PYTHONDONTWRITEBYTECODE keeps pods from writing it, so without it every
# pod would compile the worker on start. The checks prove the image holds none of the
# launcher's stack (find_spec: absent, not merely failing to import) and that the worker starts.
WORKDIR /
COPY worker /opt/tfk8s/worker
RUN chmod -R a+rX /opt/tfk8s \
 && python -c "import sysconfig; open(sysconfig.get_paths()['purelib'] + '/tfk8s-worker.pth', 'w').write('/opt/tfk8s\nimport worker.keras_check; worker.keras_check.install()\nimport worker.exception_check; worker.exception_check.install()\n')" \
 && python -m compileall -q /opt/tfk8s/worker \
 && python -c "import importlib.util, sys; found = [m for m in sys.argv[1:] if importlib.util.find_spec(m)]; sys.exit(f'the worker image must not contain {found}' if found else 0)" \
      pydantic jinja2 kubernetes launcher \
 && TF_CONFIG='{}' python -c "import sys; sys.exit(0 if any(type(f).__name__ == '_KerasImports' for f in sys.meta_path) and getattr(sys.excepthook, 'tfk8s_exception_check', False) and 'tensorflow' not in sys.modules else 'the .pth file must start the Keras and exception checks, without TensorFlow')" \
 && python -m worker --help > /dev/null

WORKDIR /home/tfk8s
# Numeric, so Kubernetes' runAsNonRoot can verify it without an /etc/passwd entry.
USER 1000:1000
ENTRYPOINT ["python", "-m", "worker"]
