# helina server image: the release binary on a slim base.
#   docker build -t helina .
#   docker run -p 7000:7000 -p 9100:9100 -v $PWD/deploy:/deploy helina \
#     server --listen 0.0.0.0:7000 --model /deploy/model.onnx --calibration /deploy/cal.npy \
#     --tls-cert /deploy/server.pem --tls-key /deploy/server.key --metrics 0.0.0.0:9100
# `docker stop` sends SIGTERM: the server drains (running sessions finish within
# --drain-timeout, 60 s by default) and exits 0; give `docker stop -t` at least that.

FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p cli \
    && cp target/release/helina /usr/local/bin/helina

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 helina
COPY --from=build /usr/local/bin/helina /usr/local/bin/helina
USER helina
EXPOSE 7000 9100
STOPSIGNAL SIGTERM
ENTRYPOINT ["helina"]
CMD ["--help"]
