# syntax=docker/dockerfile:1
# Build: docker build -t toolfs-api .
# Run:   docker run --rm --user "$(id -u):$(id -g)" -p 127.0.0.1:8080:8080 \
#          -e TOOLFS_TOKEN=change-me -v "$PWD":/workspace toolfs-api
# --user runs the server as the folder's owner, so it can write there; the
# image runs as any uid (nothing it needs is owned by its own user).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# A static binary: no cgo, nothing from the build image is needed at run time.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/toolfs-api ./cmd/toolfs-api

FROM debian:bookworm-slim
# ripgrep backs glob and grep; without it those two tools answer SEARCH_FAILED.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ripgrep ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /home/toolfs toolfs \
 && mkdir /workspace && chown toolfs:toolfs /workspace
COPY --from=build /out/toolfs-api /usr/local/bin/toolfs-api
USER toolfs
VOLUME /workspace
WORKDIR /workspace
EXPOSE 8080
# Listening on all interfaces inside the container needs a token:
# set TOOLFS_TOKEN (or TOOLFS_ALLOW_NO_TOKEN=true behind your own auth).
ENV TOOLFS_ROOT=/workspace TOOLFS_ADDR=0.0.0.0:8080 TOOLFS_LOG_FORMAT=json
ENTRYPOINT ["/usr/local/bin/toolfs-api"]
