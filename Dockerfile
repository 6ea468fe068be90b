# Static, non-root image of dedupeworker.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .dockerignore keeps .git out of the context, so the toolchain has no VCS information to stamp: `dedupeworker
# version` reports what these arguments give, "unknown" otherwise. `make image` builds with them (tagged with the
# git describe of the checkout; IMAGE=<registry>/dedupeworker names yours); by hand:
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) --build-arg REVISION_TIME=$(git log -1 --format=%cI) .
# compose.yaml passes them from the environment of `docker compose` (see its first lines).
ARG VERSION="" REVISION="" REVISION_TIME=""
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X main.buildVersion=${VERSION} -X main.buildRevision=${REVISION} -X main.buildTime=${REVISION_TIME}" \
      -o /out/dedupeworker ./cmd/dedupeworker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dedupeworker /dedupeworker
USER nonroot:nonroot
EXPOSE 9464
ENTRYPOINT ["/dedupeworker"]
CMD ["run"]
