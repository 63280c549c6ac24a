# Two commands on a fresh machine:  make run   (the service)   and   make test   (the tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# make deploy packages from a Python 3.13 venv of its own (the functions run on python3.13).
DEPLOY_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13.*/bin/python3.13) python3.13)
DEPLOY_VENV ?= .venv-deploy
DEPLOY_PY := $(DEPLOY_VENV)/bin/python

.PHONY: run bytecode localstack localstack-install rgw-install js-install web test test-setup apt-packages chromium token bench stats trace deploy chalice-deploy clean

# uv installs the venv: from its cache (~/.cache/uv) a fresh clone's venv takes seconds where pip
# downloads every package again (about 95 s here). uv itself is fetched once by pip into this
# project's cache, as LocalStack is (local/localstack.py).
UV_VERSION := 0.13.9
UV := $(HOME)/.cache/image-jobs/uv-$(UV_VERSION)/bin/uv
$(UV):
	$(PYTHON) -m pip install --quiet --target $(HOME)/.cache/image-jobs/uv-$(UV_VERSION) uv==$(UV_VERSION)

$(VENV)/.installed: requirements.txt requirements-dev.txt clients/python/pyproject.toml | $(UV)
	# No ensurepip: uv installs the pip the venv keeps (chalice 1.34 packages with it and
	# requires <26.3), so the bundled one would only be replaced.
	$(PYTHON) -m venv --without-pip $(VENV)
	# Bytecode at install (uv writes none by default): with PYTHONDONTWRITEBYTECODE=1, as on
	# this project's machines, every process compiled every import from source (0.4 CPU-s for
	# moto, boto3, chalice and Pillow compiled, 1.1 s not), and the tests start hundreds.
	$(UV) pip install --quiet --compile-bytecode --python $(PY) --upgrade-package pip 'pip<26.3' -r requirements-dev.txt
	touch $@

# Our own sources' bytecode, for the same reason; only what changed is compiled again, and a
# .pyc older than its source is never used.
bytecode: $(VENV)/.installed
	@$(PY) -m compileall -q -j 0 app.py chalicelib local infra tests benchmarks clients/python/src

run: $(VENV)/.installed bytecode web  ## the API, worker and embedded AWS services, until Ctrl-C (STORAGE=rgw: Ceph's RADOS Gateway as storage)
	$(PY) -m local

localstack:  ## LocalStack on this host (installed once, cached), until Ctrl-C; then: EMBEDDED_AWS=0 make run
	$(PYTHON) -m local.localstack

localstack-install:  ## only the cached install that make localstack and the tests use
	$(PYTHON) -m local.localstack --install

rgw-install:  ## only the Debian packages of Ceph's RADOS Gateway, which STORAGE=rgw make run and the tests use
	$(PYTHON) -m local.rgw --install

# Side by side, four workers on two cores: the suite is CPU-bound, yet a worker waiting on a
# lease, a broker or a browser leaves a core idle that another fills (fresh clones: 628 s of
# pytest with three, 572 s with four; docs/testing.md). tests/conftest.py keeps together what
# shares a costly start (one LocalStack, one package build, a module's runner).
TEST_WORKERS ?= 4
test:  ## every test: unit, integration (moto, RabbitMQ), end-to-end (HTTP, on moto, LocalStack and the RADOS Gateway), browser, the JavaScript package
	@$(MAKE) --no-print-directory -j4 test-setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30  # the slowest 30: where CI time goes

# What the tests need, side by side (CI counts this time too): the two venvs, LocalStack's
# cached install and the JavaScript package's each wait on the network or a cache, not on each
# other. apt holds a lock, so Debian's packages (chromium, then the gateway's) go in turn.
test-setup: $(VENV)/.installed $(DEPLOY_VENV)/.installed bytecode localstack-install js-install web apt-packages
apt-packages:
	@$(MAKE) --no-print-directory chromium
	@$(MAKE) --no-print-directory rgw-install

# The JavaScript package's dependencies (clients/js): from the lock file, once; npm's cache
# serves them afterwards, so later runs need no network. Node 20+ and npm come with the machine
# (docs/testing.md); without them this stops here, before any test runs.
js-install: clients/js/node_modules/.package-lock.json
clients/js/node_modules/.package-lock.json: clients/js/package.json clients/js/package-lock.json
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' && npm --version >/dev/null \
	  || { echo "make js-install: Node.js 20+ and npm are needed (apt-get install nodejs npm)" >&2; exit 1; }
	cd clients/js && npm ci --prefer-offline --no-audit --no-fund
	@touch $@

# The page (web/) loads the package as one ES module: esbuild bundles clients/js/src with
# blurhash, minified, for browsers. Built, not committed; rebuilt when the package changes.
WEB_BUNDLE := web/vendor/image-jobs-client.js
web: $(WEB_BUNDLE)  ## only the page's bundle of clients/js (web/vendor/), which make run and make test build
$(WEB_BUNDLE): clients/js/node_modules/.package-lock.json $(wildcard clients/js/src/*.ts)
	clients/js/node_modules/.bin/esbuild clients/js/src/index.ts --bundle --format=esm --platform=browser \
	  --target=es2022 --minify --sourcemap --log-level=warning --outfile=$@

# The browser tests drive Debian's chromium (Playwright downloads nothing); root installs it.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	  else sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; fi; }

token: $(VENV)/.installed  ## a dev bearer token: make token SUB=alice; the service's: make token SERVICE=1
	@$(PY) -m local.token $(if $(SERVICE),$(or $(SUB),app-backend) --service,$(or $(SUB),alice))

stats: $(VENV)/.installed  ## what the local run did: its metrics and warnings (make stats LOG=path)
	@$(PY) -m local.stats $(LOG)

trace: $(VENV)/.installed  ## one job's log lines, in order: make trace JOB=<job_id>
	@$(PY) -m local.stats $(LOG) --job $(JOB)

bench: $(VENV)/.installed  ## the resize benchmark
	$(PY) benchmarks/resize.py

# The Lambda runtime is the Python that packages: Chalice names the runtime after the
# interpreter it runs on (python3.13) and picks each wheel for that runtime's glibc. The
# service runs and is tested on $(PYTHON) (3.11); the functions run on python3.13 (Amazon
# Linux 2023, glibc 2.34), which pyvips-binary's libvips needs (manylinux_2_28; python3.11's
# Amazon Linux 2 has glibc 2.26). Its own venv holds only what packaging runs: Chalice.
$(DEPLOY_VENV)/.installed: requirements-deploy.txt requirements.txt | $(UV)
	@$(DEPLOY_PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' \
	  || { echo "make deploy: Python 3.13 is needed to package for the python3.13 runtime (DEPLOY_PYTHON=/path/to/python3.13)" >&2; exit 1; }
	$(DEPLOY_PYTHON) -m venv --without-pip $(DEPLOY_VENV)  # requirements-deploy.txt has its pip
	$(UV) pip install --quiet --compile-bytecode --python $(DEPLOY_PY) -r requirements-deploy.txt
	touch $@

STAGE ?= dev
STAGE_CONFIG = $(PY) -m infra.stage_config $(STAGE) $(if $(STACK),--stack $(STACK))
deploy: $(VENV)/.installed $(DEPLOY_VENV)/.installed  ## after infra/template.yaml is deployed: make deploy STAGE=dev (docs/deploy.md)
	$(STAGE_CONFIG)
	$(MAKE) --no-print-directory chalice-deploy STAGE=$(STAGE)
	# The first deploy creates the WebSocket API: its URL and ManageConnections on it reach the
	# stage now (exit 3: the stage changed), and a second deploy carries them.
	$(STAGE_CONFIG) --changed-exit-code 3 || { [ $$? = 3 ] && $(MAKE) --no-print-directory chalice-deploy STAGE=$(STAGE); }
	$(PY) -m infra.gateway_responses $(STAGE)
	$(PY) -m infra.stream_source $(STAGE)

chalice-deploy:
	# Chalice caches the package by a hash of the tree; bytecode goes into that package, and
	# nothing may write a .pyc into chalicelib/ before deploy looks it up again (infra/bytecode.py).
	PYTHONDONTWRITEBYTECODE=1 $(DEPLOY_VENV)/bin/chalice package --stage $(STAGE) build/package-$(STAGE)
	$(DEPLOY_PY) -m infra.bytecode .
	PYTHONDONTWRITEBYTECODE=1 $(DEPLOY_VENV)/bin/chalice deploy --stage $(STAGE)

clean:
	rm -rf $(VENV) $(DEPLOY_VENV) .pytest_cache
