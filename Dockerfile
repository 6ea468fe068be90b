# Static, non-root image of dedupeworker.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/dedupeworker ./cmd/dedupeworker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dedupeworker /dedupeworker
USER nonroot:nonroot
EXPOSE 9464
ENTRYPOINT ["/dedupeworker"]
CMD ["run"]
