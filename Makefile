# The two commands a new user needs (README.md): `make demo` and `make test`.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
APT_PACKAGES := libsqlcipher-dev libsodium-dev pkg-config

.PHONY: deps demo test test-sanitizers benchmarks

## Install the system libraries when missing (Debian/Ubuntu).
deps:
	@dpkg -s $(APT_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(APT_PACKAGES); }

## The main job: the narrated walkthrough.
demo: deps
	swift build -c release --product protected-store
	.build/release/protected-store demo

## Every test, then the whole suite again under Thread Sanitizer (its own build folder).
test: deps
	swift test
	swift test --sanitize=thread --scratch-path .build-tsan

## Benchmarks (a separate package, so tests never build package-benchmark).
benchmarks: deps
	cd Benchmarks && swift package benchmark
