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
FROM ${BASE}

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
    HOME=/home/tfk8s \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# `python3` is /usr/local/bin/python3 in python:*-slim and Debian's /usr/bin/python3 (with
# python3-venv) in the offline base; the venv makes `python` the same interpreter in both.
# HOME must be writable by the non-root user: Keras caches downloaded datasets in ~/.keras.
RUN python3 -m venv "$VIRTUAL_ENV" \
 && mkdir -p /home/tfk8s \
 && chown 1000:1000 /home/tfk8s

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

# The worker package alone, as source: no pip install of the project, which would bring the
# launcher and its templates along. A .pth file in the venv puts /opt/tfk8s on sys.path, so
# `python -m worker` works from any directory and for any user, and survives a PYTHONPATH the
# pod sets for its own program (an ENV PYTHONPATH would be replaced by it). compileall writes
# the bytecode now: PYTHONDONTWRITEBYTECODE keeps pods from writing it, so without it every
# pod would compile the worker on start. The checks prove the image holds none of the
# launcher's stack (find_spec: absent, not merely failing to import) and that the worker starts.
WORKDIR /
COPY worker /opt/tfk8s/worker
RUN rm -rf /tmp/tfk8s-src \
 && chmod -R a+rX /opt/tfk8s \
 && python -c "import sysconfig; open(sysconfig.get_paths()['purelib'] + '/tfk8s-worker.pth', 'w').write('/opt/tfk8s\n')" \
 && python -m compileall -q /opt/tfk8s/worker \
 && python -c "import importlib.util, sys; found = [m for m in sys.argv[1:] if importlib.util.find_spec(m)]; sys.exit(f'the worker image must not contain {found}' if found else 0)" \
      pydantic jinja2 kubernetes launcher \
 && python -m worker --help > /dev/null

WORKDIR /home/tfk8s
# Numeric, so Kubernetes' runAsNonRoot can verify it without an /etc/passwd entry.
USER 1000:1000
ENTRYPOINT ["python", "-m", "worker"]
