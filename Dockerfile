# A Linux environment that builds and tests Transfer, for machines that are
# not Linux (the engine needs epoll, eventfd, timerfd and netlink; see
# docs/PLATFORMS.md). From the repository's top folder:
#
#   docker build -t transfer-dev .
#   docker run --rm -it -v "$PWD":/src -w /src transfer-dev scripts/test.sh --quick
#
# The image holds the toolchain and the system packages only; the sources are
# mounted, so edits on the host are built in the container as they are.
ARG SWIFT_IMAGE=swift:6.1-bookworm
FROM ${SWIFT_IMAGE}

# What scripts/bootstrap.sh installs, installed once in the image: libcurl and
# OpenSSL development files (the engine links them), and the peers the
# integration tests start (nginx, openssl, socat, curl, Python's h2).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcurl4-openssl-dev libssl-dev openssl nginx-light iproute2 curl tmux socat python3-h2 \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
CMD ["scripts/test.sh", "--quick"]
