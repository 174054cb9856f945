# The two commands a new user needs (README.md): `make demo` and `make test`.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
## What the build links (SQLCipher, libsodium; sd-bus for the session lock, tpm2-tss for the TPM, libedit for the shell)
## and what the tests start (a private D-Bus with python3-dbusmock's logind, a software TPM).
APT_PACKAGES := libsqlcipher-dev libsodium-dev pkg-config libsystemd-dev libtss2-dev libedit-dev
TEST_APT_PACKAGES := dbus python3-dbusmock swtpm swtpm-tools tpm2-tools sqlcipher
## The example apps and the benchmarks build in one scratch folder, so the library they share is compiled once.
EXAMPLES_SCRATCH := $(CURDIR)/.build-examples

.PHONY: help deps test-deps docs-serve docs-check doc-transcripts demo test lifecycle-stress doc-snippets docs api-check simulate-long benchmarks benchmarks-build peers fuzz fuzz-smoke example deb deb-check

## List the targets and what each does (the default target).
## What each does is the first line of the `##` comment above it: keep that line a summary of its own.
help:
	@awk '/^## / { if (!inComment) summary = substr($$0, 4); inComment = 1; next } \
	     { inComment = 0 } \
	     /^$$/ { summary = "" } \
	     /^[a-z][a-z-]*:([^=]|$$)/ { split($$0, name, ":"); printf "  make %-17s %s\n", name[1], summary; summary = "" }' $(firstword $(MAKEFILE_LIST))

## Install the system libraries when missing (Debian/Ubuntu).
deps:
	@dpkg -s $(APT_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(APT_PACKAGES); }

## What the tests need beyond the build: a bus, a mock logind, a software TPM.
test-deps: deps
	@dpkg -s $(TEST_APT_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(TEST_APT_PACKAGES); }

## The main job: the narrated walkthrough.
demo: deps
	swift build -c release --product protected-store
	.build/release/protected-store demo

## The ASan links use lld, the toolchain's own linker, when it is there. clang hands the linker the ASan runtime's
## export list (--dynamic-list=libclang_rt.asan-x86_64.a.syms) so that a library loaded later finds the
## runtime; 141 of its symbols are local in the runtime archive (the __asan_report_*_asm stubs and the like).
## gold, swiftc's default on Linux, warns "Cannot export local symbol" for each, at each of the two links
## (the tool and the test bundle): 282 warnings that hide real ones. lld skips local symbols in a dynamic
## list without a word; the binaries export the same runtime symbols either way.
ASAN_LINK := $(shell test -x "$$(dirname "$$(command -v swiftc)")/ld.lld" && echo -Xswiftc -use-ld=lld)

## One test case per core at a time (swift-testing's SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH). A test runs
## on Swift's cooperative pool, one thread per core, and many tests here block their thread (a child process, a
## long loop of file I/O); with every test in flight at once, two such tests held the whole pool while the time
## limits of the rest ran on: a clean-clone CI run timed 29 quick tests out at 180 s under TSan. A test case
## waiting for its turn has not started its time limit. The wall time is the same (TSan: 3 min 34 s either way).
TEST_WIDTH ?= $(shell nproc)
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH := $(TEST_WIDTH)

## The sanitizer runs skip the suites that are long, single-threaded loops of file I/O or child processes over
## code the rest of the suite runs too — the I/O fault sweeps (49 sweeps, 1,092 fault points; and those of backup,
## restore and export), the simulator's
## suites (hundreds of seeds), the inbox and log damage suites, the hostile-user and memory-scan tests, and the
## SIGKILL crash replays (26–71 s a test under TSan, 181 s for the four), the TPM's memory scan (ASan's quarantine keeps
## freed copies), and the merge-memory, cursor-memory and simulator-memory
## measurements (processes of their own, meaningless under a sanitizer's allocator, whose quarantine keeps freed
## memory resident; under ThreadSanitizer a seed's memory mappings grow by 40 over its 1,200 steps, the same in
## every run, where the plain run's grow by 3), the SQLCipher 4 oracle and the other readers of exports (Python processes reading files the plain
## run's tests wrote the same way),
## the suites that drive the tool's binary at a terminal or against a software TPM, and the address-space-limit test
## (a sanitizer reserves terabytes of address space for its shadow memory, so RLIMIT_AS cannot be lowered to what is
## in use): several times slower under a
## sanitizer, they would add minutes to each run. Every one of them runs in full in the plain `swift test` above.
SANITIZER_SKIP := --skip 'IOFaultSweepTests|SimulatorTests|SimulatorCoverageTests|DiskFaultVFSTests|InboxDamageTests|InboxFileTypeTests|InboxAtAttachTests|InboxReplayTests|StoreDamageTests|WriteAheadLogCheckTests|HostileUserTests|ClientPasscodeMemoryTests|FaultNextIOTests|CrashTests|InboxMergeMemoryTests|cursorMemoryIsBounded|SQLCipher4OracleTests|ShellTerminalTests|KeyStoreCommandLineTests|DesktopScriptTests|unwrapUnderAddressSpaceLimitThrows|unsealedKeyLeavesNoCopy|BackupFaultSweepTests|ExportPowerCutTests|ExportOracleTests|ExportReadersTests|RestoredStoreOracleTests|StoreFileKindCommandLineTests|LastReferenceTests|UnwritableOutputTests|StoreEndsCommandLineTests|LogindRestartTests|AgentDeviceKeyMemoryTests|SimulatorMemoryTests|AgentPasscodeSecretMemoryTests|AppSimulationTests'

## The 400-iteration loops of LastReferenceTests (launch, terminate, a call from the coordinator's last holder)
## run in the plain suite only: the same race is run under both sanitizers by StoreThreadLifetimeTests (20,000
## calls from an actor's last holder) and LifecycleStressTests, in a fraction of the time.
## Every test, a bounded simulation, then the suite again under Thread and Address Sanitizer.
## The simulation: 100 seeds × 200 steps (SimulatorTests and SimulatorCoverageTests run hundreds more in the suite).
test: test-deps
	swift test
	.build/debug/protected-store simulate --seeds 100 --steps 200
	swift test --sanitize=thread --scratch-path .build-tsan $(SANITIZER_SKIP)
	LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-suppressions.txt:print_suppressions=0 swift test --sanitize=address --scratch-path .build-asan $(ASAN_LINK) $(SANITIZER_SKIP)

## The lifecycle stress test, long, under ThreadSanitizer and then AddressSanitizer.
## LIFECYCLE_STRESS_SEEDS seeds (200) of LIFECYCLE_STRESS_STEPS steps (300), with the store-thread lifetime
## loop and the last-holder loops.
LIFECYCLE_STRESS_SEEDS ?= 200
LIFECYCLE_STRESS_STEPS ?= 300
LIFECYCLE_FILTER := 'LifecycleStressTests|StoreThreadLifetimeTests|LastReferenceTests'
lifecycle-stress: deps
	LIFECYCLE_STRESS_SEEDS=$(LIFECYCLE_STRESS_SEEDS) LIFECYCLE_STRESS_STEPS=$(LIFECYCLE_STRESS_STEPS) \
	    swift test --sanitize=thread --scratch-path .build-tsan --filter $(LIFECYCLE_FILTER)
	LIFECYCLE_STRESS_SEEDS=$(LIFECYCLE_STRESS_SEEDS) LIFECYCLE_STRESS_STEPS=$(LIFECYCLE_STRESS_STEPS) \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-suppressions.txt:print_suppressions=0 \
	    swift test --sanitize=address --scratch-path .build-asan $(ASAN_LINK) --filter $(LIFECYCLE_FILTER)

## Check that every ```swift block of README.md and of the DocC articles compiles and runs.
## scripts/doc-snippets.py checks that
## each block is, byte for byte, a region between `// snippet.NAME` and `// snippet.end` in
## Tests/DocumentationSnippetTests (code run against the simulated device) or Tests/DocumentationManifest (Package.swift
## fragments, evaluated), then runs those tests; a block that drifted names its line and the first line that differs.
## CONTRIBUTING.md says how to add a block. `--self-test` first: the check fails on a block that drifted by a line.
doc-snippets: deps
	python3 scripts/doc-snippets.py --self-test
	swift build --build-tests
	python3 scripts/doc-snippets.py

## Run every other block of the documents and compare it with what the tool prints.
## README.md, CONTRIBUTING.md and the DocC articles: transcripts (```console), shell sessions at a terminal
## (```shell-session), scripts (```sh), the command language (the shell's `help`), run on the debug build; inline
## `protected-store …` and `make …` commands checked against the tool's --help and the Makefile's targets.
## `--self-test` first: the check fails on a transcript that drifted by a character.
doc-transcripts: deps
	swift build --product protected-store
	python3 scripts/doc-transcripts.py --self-test
	python3 scripts/doc-transcripts.py

## Build the documentation (DocC), warnings as errors.
## A DocC catalog per public library module (Sources/*/Documentation.docc), built with
## swift-docc-plugin, warnings as errors, so an unresolved symbol link or an undocumented parameter fails.
## The modules are merged into one combined archive (the plugin's --enable-experimental-combined-documentation),
## so that one index holds every module's tree and a link into a module another depends on resolves:
## .build/docs/ProtectedStore.doccarchive. The plugin exits 0 when the merge fails (a missing folder, say): the
## archive's index is checked after it.
DOC_TARGETS := StoreErrors SecureKeys EncryptedSQLite ProtectedData ProtectedStore ProtectedStoreTesting ProtectedStoreHarness TPMKeys LinuxDevice
DOCS_ARCHIVE := .build/docs/ProtectedStore.doccarchive
docs: deps
	mkdir -p $(dir $(DOCS_ARCHIVE))
	swift package --allow-writing-to-directory $(dir $(DOCS_ARCHIVE)) generate-documentation \
	    $(addprefix --target ,$(DOC_TARGETS)) --enable-experimental-combined-documentation \
	    --output-path $(DOCS_ARCHIVE) --warnings-as-errors
	@test -f $(DOCS_ARCHIVE)/index/index.json || { echo "make docs: no combined archive at $(DOCS_ARCHIVE)" >&2; exit 1; }

## Check the documentation make docs built, as a browser opens it.
## scripts/check-docs.py serves the combined archive as docs-serve does and asks it: `/` redirects to
## ProtectedStore's module page, the index served there lists ProtectedStore's own symbols, each module's sidebar
## tree is its own, every link between pages (across modules too) names a page the archive has, the main types'
## members are grouped by hand, and no code line is wider than the code box.
docs-check:
	python3 scripts/check-docs.py $(DOCS_ARCHIVE)

## Serve the documentation make docs built, at http://localhost:8000 (DOCS_PORT=…).
## An archive is a web app, blank when opened from disk. `/` opens /documentation/protectedstore/, the app's
## module; /documentation/encryptedsqlite/ is its SQL layer. Ctrl-C stops it.
DOCS_PORT ?= 8000
docs-serve:
	@test -d $(DOCS_ARCHIVE) || { echo "no documentation yet: run make docs first" >&2; exit 1; }
	python3 scripts/serve-docs.py $(DOCS_PORT) $(DOCS_ARCHIVE)

## Check the public API of the library modules.
## Every public declaration documented, no test hook public
## (scripts/public-api.py reads `swift package dump-symbol-graph`; `--list` names what is missing).
api-check: deps
	python3 scripts/public-api.py --scratch-path .build --own-docs --check

## The long simulation the README reports (10,000 seeds × 200 steps).
## Power cuts included, in 8 processes
## (scripts/simulate-long.sh says why 8, and why no eatmydata any more).
simulate-long: deps
	scripts/simulate-long.sh

## Benchmarks (a separate package, so tests never build package-benchmark); see Benchmarks/BENCHMARKS.md.
benchmarks: deps
	cd Benchmarks && swift package benchmark

## Compile the benchmarks without running them (CI), so they never rot.
## In the examples' scratch folder: the library they share is compiled once for both.
benchmarks-build: deps
	swift build --package-path Benchmarks --scratch-path $(EXAMPLES_SCRATCH)

## The peer benchmark: the same workloads through ProtectedStore and through GRDB.
## Benchmarks/Peers, a package of
## its own over the system's SQLite, libsqlite3-dev), release builds, interleaved runs, medians; writes
## Benchmarks/results/peers.json and peers.svg (Benchmarks/BENCHMARKS.md, section 7). PEERS_FLAGS=--no-build
## reuses the binaries already built.
PEERS_FLAGS ?=
peers: deps
	@dpkg -s libsqlite3-dev >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libsqlite3-dev; }
	python3 Benchmarks/scripts/peers.py $(PEERS_FLAGS)
	python3 Benchmarks/scripts/chart.py --peers Benchmarks/results/peers.json > Benchmarks/results/peers.svg

## Every fuzz target for FUZZ_SECONDS each (libFuzzer + AddressSanitizer); fuzz-smoke is CI's short run.
FUZZ_SECONDS ?= 300
fuzz: deps
	Fuzz/run-all.sh $(FUZZ_SECONDS)

## A short run of every fuzz target (5 s each, built without optimization), as CI does.
fuzz-smoke: deps
	FUZZ_OPTIMIZATION=-Onone Fuzz/run-all.sh 5

## Build and run the example apps (Examples/Notes, Examples/PassphraseKeys).
## Each is a separate package (CI builds and runs both): Examples/Notes, an app on the data
## layer, and Examples/PassphraseKeys, a key source of an app's own written against the public API. Each runs a
## story that exits non-zero with what went wrong when a step does not behave as expected; `notes simulate` runs
## the Notes app on AppSimulation's seeds, then finds and shrinks its two planted bugs.
example: deps
	swift build --package-path Examples/Notes --scratch-path $(EXAMPLES_SCRATCH)
	swift run --package-path Examples/Notes --scratch-path $(EXAMPLES_SCRATCH) --skip-build notes
	swift run --package-path Examples/Notes --scratch-path $(EXAMPLES_SCRATCH) --skip-build notes simulate
	swift build --package-path Examples/PassphraseKeys --scratch-path $(EXAMPLES_SCRATCH)
	swift run --package-path Examples/PassphraseKeys --scratch-path $(EXAMPLES_SCRATCH) --skip-build passphrase-keys

## Build the .deb a desktop user installs without a Swift toolchain (.build/deb/).
## scripts/build-deb.sh: a release build with the Swift runtime linked statically (--static-swift-stdlib),
## packaged with dpkg-deb — the tool in /usr/bin, the user unit in /usr/lib/systemd/user/, a man page generated
## from the tool's help (swift-argument-parser's generate-manual), bash, zsh and fish completions; Depends from
## dpkg-shlibdeps (dpkg-dev; strip is binutils').
DEB_APT_PACKAGES := dpkg-dev binutils
deb: deps
	@dpkg -s $(DEB_APT_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(DEB_APT_PACKAGES); }
	scripts/build-deb.sh

## Build the .deb, install it with dpkg -i, and run the installed tool against a mock logind (CI).
## scripts/check-deb.sh: `--version`, no Swift runtime linked dynamically, the unit, man page and completions in
## place, then DesktopScriptTests (scripts/try-on-desktop.sh: set-up, lock, unlock) with the installed tool.
## Installs into the real /usr (as root, or with sudo), and removes the package at the end unless it was there.
deb-check: test-deps
	@dpkg -s $(DEB_APT_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(DEB_APT_PACKAGES); }
	scripts/check-deb.sh
