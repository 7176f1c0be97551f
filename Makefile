# Legion's build. `make test` is the one test command (README, .ci/run).
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR   = $(PREFIX)/bin
UNITDIR  = $(PREFIX)/lib/systemd/user
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  = -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build test check-deps lint bench fuzz install clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/legion ./cmd/legion

# Unit and integration tests. Integration tests start private systemd user
# managers (see units/sdtest); with CI=true a missing prerequisite fails them.
test: check-deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...

check-deps:
	@./scripts/check-deps

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

bench: check-deps
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./... 

# Short fuzz runs of every fuzz target; FUZZTIME=1m for longer.
FUZZTIME ?= 10s
fuzz:
	@./scripts/fuzz $(FUZZTIME)

install: build
	install -D -m 0755 bin/legion $(DESTDIR)$(BINDIR)/legion
	./bin/legion install --unit-dir $(DESTDIR)$(UNITDIR) --bin $(BINDIR)/legion --packaged

clean:
	rm -rf bin
