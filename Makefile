# ffsck: build and install. `make` builds the static release binary (scripts/build-env.sh);
# `make install` puts ffsck (stripped), its man page and its shell completions under
# $(DESTDIR)$(PREFIX); `make install-debug` adds its debug info as a separate file under
# $(DEBUGDIR)/.build-id, where gdb and perf look for it; `make install-fsck-links` adds
# fsck.ext2/3/4 links to it; `make uninstall` removes them all.
# FFSCK_BIN=path installs a binary built elsewhere instead of building one.

PREFIX ?= /usr/local
DESTDIR ?=
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
DEBUGDIR ?= $(PREFIX)/lib/debug
FSCK_TYPES = ext2 ext3 ext4
STRIP ?= strip
OBJCOPY ?= objcopy
READELF ?= readelf

HOST := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
ifeq ($(FFSCK_BIN),)
FFSCK_BIN := target/$(HOST)/release/ffsck
BUILD := 1
endif
# The generated man page and completions (from the binary's own --generate).
GEN ?= target/pkg

SHELL := /bin/bash
INSTALL ?= install

.PHONY: all build generate split-debug install install-debug install-fsck-links uninstall clean-pkg

all: build generate split-debug

build:
ifeq ($(BUILD),1)
	source scripts/build-env.sh && cargo build --release --locked -p ffsck
endif
	@test -x "$(FFSCK_BIN)" || { echo "no ffsck binary at $(FFSCK_BIN)" >&2; exit 1; }

generate: build
	mkdir -p $(GEN)
	"$(FFSCK_BIN)" --generate man > $(GEN)/ffsck.8
	gzip -9nf < $(GEN)/ffsck.8 > $(GEN)/ffsck.8.gz
	"$(FFSCK_BIN)" --generate complete-bash > $(GEN)/ffsck.bash
	"$(FFSCK_BIN)" --generate complete-zsh > $(GEN)/_ffsck
	"$(FFSCK_BIN)" --generate complete-fish > $(GEN)/ffsck.fish

# What distributions ship (Debian's dh_strip, Fedora's find-debuginfo): the binary without its
# symbols and debug info (the release profile keeps line tables, for perf and backtraces in
# the lab), which go to ffsck.debug, linked from the binary by build ID and .gnu_debuglink.
split-debug: build
	mkdir -p $(GEN)
	$(OBJCOPY) --only-keep-debug --compress-debug-sections=zlib "$(FFSCK_BIN)" $(GEN)/ffsck.debug
	$(STRIP) --strip-all --remove-section=.comment -o $(GEN)/ffsck "$(FFSCK_BIN)"
	cd $(GEN) && $(OBJCOPY) --add-gnu-debuglink=ffsck.debug ffsck

# The build ID of a binary (hex), as gdb's and perf's .build-id/xx/rest.debug paths use it.
build_id = $$($(READELF) -n $(1) | sed -n 's/^ *Build ID: *//p')

install: all
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	$(INSTALL) -m 0755 $(GEN)/ffsck $(DESTDIR)$(SBINDIR)/ffsck
	$(INSTALL) -m 0644 $(GEN)/ffsck.8.gz $(DESTDIR)$(MANDIR)/man8/ffsck.8.gz
	$(INSTALL) -m 0644 $(GEN)/ffsck.bash $(DESTDIR)$(BASHCOMPDIR)/ffsck
	$(INSTALL) -m 0644 $(GEN)/_ffsck $(DESTDIR)$(ZSHCOMPDIR)/_ffsck
	$(INSTALL) -m 0644 $(GEN)/ffsck.fish $(DESTDIR)$(FISHCOMPDIR)/ffsck.fish

# Optional: the debug info of the installed binary, for gdb and perf (and symbolised
# backtraces) on the machine that runs it.
install-debug: split-debug
	@id=$(call build_id,$(GEN)/ffsck); \
	test -n "$$id" || { echo "$(FFSCK_BIN) has no build ID (link with --build-id)" >&2; exit 1; }; \
	d=$(DESTDIR)$(DEBUGDIR)/.build-id/$${id:0:2}; \
	$(INSTALL) -D -m 0644 $(GEN)/ffsck.debug $$d/$${id:2}.debug

# Optional: fsck.ext2/3/4 as links to ffsck, so that fsck(8) and systemd-fsck run it. With
# PREFIX=/usr (or SBINDIR=/sbin) they replace e2fsprogs' own fsck.ext* links.
install-fsck-links:
	@test -e $(DESTDIR)$(SBINDIR)/ffsck || { echo "run make install first" >&2; exit 1; }
	for t in $(FSCK_TYPES); do ln -sf ffsck $(DESTDIR)$(SBINDIR)/fsck.$$t; done

# Removes the links only where they point at ffsck.
uninstall:
	@if [ -f $(DESTDIR)$(SBINDIR)/ffsck ]; then \
		id=$(call build_id,$(DESTDIR)$(SBINDIR)/ffsck); \
		if [ -n "$$id" ]; then \
			rm -f $(DESTDIR)$(DEBUGDIR)/.build-id/$${id:0:2}/$${id:2}.debug; \
			rmdir $(DESTDIR)$(DEBUGDIR)/.build-id/$${id:0:2} 2>/dev/null || true; \
		fi; \
	fi
	for t in $(FSCK_TYPES); do \
		l=$(DESTDIR)$(SBINDIR)/fsck.$$t; \
		if [ "$$(readlink $$l)" = ffsck ]; then rm -f $$l; fi; \
	done
	rm -f $(DESTDIR)$(SBINDIR)/ffsck $(DESTDIR)$(MANDIR)/man8/ffsck.8.gz \
		$(DESTDIR)$(BASHCOMPDIR)/ffsck $(DESTDIR)$(ZSHCOMPDIR)/_ffsck \
		$(DESTDIR)$(FISHCOMPDIR)/ffsck.fish

clean-pkg:
	rm -rf $(GEN)
