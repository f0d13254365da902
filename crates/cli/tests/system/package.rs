//! The installable package: the man page renders cleanly and names every long option,
//! `make install` / `make install-fsck-links` / `make uninstall` put the files where they
//! belong, the .deb of scripts/deb.sh holds them and runs, util-linux `fsck -t ext4` runs ffsck
//! through the links, the release binary is static, the installed binary (make install and the
//! .deb) is stripped and at most 8 MiB with its debug info installable apart (make
//! install-debug), and `-V` names the e2fsck release followed.
//! Everything reuses the built binary (CARGO_BIN_EXE_ffsck); nothing is compiled here.

use crate::common;

use common::{ffsck_bin, mkfs, tools};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of `name` in PATH or the sbin directories, or `None` after printing why the test
/// is skipped.
fn need(name: &str, package: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin"].iter().map(PathBuf::from));
    let found = dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file());
    if found.is_none() {
        common::skip(&format!(
            "SKIPPED: {name} not found (install {package}; scripts/ensure-tools.sh does)"
        ));
    }
    found
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Rendered man text without overstrike (bold, underline) and with groff's hyphens as "-".
fn plain(text: &str) -> String {
    let mut s = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if chars.peek() == Some(&'\u{8}') {
            chars.next();
            continue;
        }
        s.push(if c == '\u{2010}' || c == '\u{2212}' {
            '-'
        } else {
            c
        });
    }
    s
}

fn generate(what: &str) -> String {
    let (code, out, err) = run(Command::new(ffsck_bin()).args(["--generate", what]));
    assert_eq!(code, 0, "ffsck --generate {what}: {err}");
    out
}

/// The long options `ffsck --help` lists.
fn long_options() -> Vec<String> {
    let (code, help, _) = run(Command::new(ffsck_bin()).arg("--help"));
    assert_eq!(code, 0);
    // The option lines: "  -m, --threads <THREADS>", "      --json <JSON>".
    let mut opts: Vec<String> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| {
            l.split([' ', ','])
                .filter(|w| w.starts_with("--") && w.len() > 2)
        })
        .map(str::to_string)
        .collect();
    opts.sort();
    opts.dedup();
    assert!(
        opts.len() >= 12 && opts.iter().any(|o| o == "--repair-log"),
        "parsed too few long options from --help: {opts:?}"
    );
    opts
}

#[test]
fn version_names_the_e2fsck_release_followed() {
    for flag in ["-V", "--version"] {
        let (code, out, _) = run(Command::new(ffsck_bin()).arg(flag));
        assert_eq!(code, 0);
        assert_eq!(
            out.trim(),
            format!(
                "ffsck {} (follows e2fsck 1.47.0)",
                env!("CARGO_PKG_VERSION")
            )
        );
    }
}

#[test]
fn man_page_renders_without_warnings_and_names_every_long_option() {
    let page = generate("man");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ffsck.8");
    std::fs::write(&path, &page).unwrap();
    for section in [
        "NAME",
        "SYNOPSIS",
        "OPTIONS",
        "EXIT STATUS",
        "FILES",
        "ENVIRONMENT",
        "E2FSCK COMPATIBILITY",
        "BOOT USE",
        "SEE ALSO",
    ] {
        assert!(
            page.contains(&format!(".SH \"{section}\""))
                || page.contains(&format!(".SH {section}\n")),
            "man page has no {section} section"
        );
    }
    let Some(groff) = need("groff", "groff") else {
        return;
    };
    let (code, text, err) = run(Command::new(groff)
        .args(["-man", "-Tutf8", "-ww", "-rLL=200n", "-rHY=0"])
        .arg(&path));
    assert_eq!(code, 0, "groff failed: {err}");
    assert!(err.trim().is_empty(), "groff -ww warned:\n{err}");
    let rendered = plain(&text);
    for opt in long_options() {
        if opt == "--help" || opt == "--version" {
            assert!(rendered.contains(&opt), "man page lacks {opt}");
            continue;
        }
        assert!(rendered.contains(&opt), "man page does not mention {opt}");
    }
    // Justified lines stretch their spaces: compare with the whitespace collapsed.
    let flat = rendered.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("EXIT STATUS") && flat.contains("follows the behaviour of e2fsck 1.47.0"),
        "the man page does not say which e2fsck it follows"
    );
    let Some(man) = need("man", "man-db") else {
        return;
    };
    let (code, out, err) = run(Command::new(man)
        .arg("-l")
        .arg(&path)
        .env("MANWIDTH", "100")
        .env("PAGER", "cat"));
    assert_eq!(code, 0, "man -l failed: {err}");
    assert!(err.trim().is_empty(), "man -l warned:\n{err}");
    let out = plain(&out);
    assert!(out.contains("BOOT USE"), "man -l output:\n{out}");
}

#[test]
fn completions_name_the_long_options() {
    let opts = long_options();
    for shell in ["bash", "zsh", "fish"] {
        let script = generate(&format!("complete-{shell}"));
        for opt in &opts {
            let needle = if shell == "fish" {
                format!("-l {}", &opt[2..])
            } else {
                opt.clone()
            };
            assert!(script.contains(&needle), "{shell} completion lacks {opt}");
        }
        assert!(
            !script.contains("generate"),
            "{shell} completion offers the hidden --generate"
        );
    }
}

/// A release build made through scripts/build-env.sh (the target directory names the host)
/// is linked statically, as rescue media need.
#[test]
fn release_binary_is_static() {
    let bin = ffsck_bin();
    if !bin.to_string_lossy().contains("-linux-gnu/") {
        common::skip(&format!(
            "SKIPPED: {} was not built through scripts/build-env.sh (no crt-static)",
            bin.display()
        ));
        return;
    }
    let Some(file) = need("file", "file") else {
        return;
    };
    let (_, out, _) = run(Command::new(file).arg("-L").arg(&bin));
    assert!(out.contains("static"), "not static: {out}");
    let (_, out, err) = run(Command::new("ldd").arg(&bin));
    assert!(
        !out.contains("=>") && format!("{out}{err}").contains("statically linked")
            || format!("{out}{err}").contains("not a dynamic executable"),
        "ldd lists libraries: {out}{err}"
    );
}

/// The largest installed binary allowed: it goes into initramfs images and rescue media.
const MAX_INSTALLED_BYTES: u64 = 8 << 20;

/// One section header of an ELF64 little-endian file: name, type, flags.
struct Section {
    name: String,
    kind: u32,
    flags: u64,
    data: Vec<u8>,
}

const SHT_SYMTAB: u32 = 2;
const SHF_ALLOC: u64 = 2;

/// The sections of the ELF64 little-endian file at `path`, read from its section headers.
fn sections(path: &Path) -> Vec<Section> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        b.len() > 64 && b[..4] == *b"\x7fELF" && b[4] == 2 && b[5] == 1,
        "{} is not a little-endian ELF64 file",
        path.display()
    );
    let u16_at = |o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(0x28) as usize,
        u16_at(0x3a),
        u16_at(0x3c),
        u16_at(0x3e),
    );
    let header = |i: usize| shoff + i * shentsize;
    let data = |h: usize| {
        let (kind, off, size) = (u32_at(h + 4), u64_at(h + 0x18) as usize, u64_at(h + 0x20));
        // SHT_NOBITS (.bss) has a size but no bytes in the file.
        if kind == 8 {
            Vec::new()
        } else {
            b[off..off + size as usize].to_vec()
        }
    };
    let names = data(header(shstrndx));
    (0..shnum)
        .map(|i| {
            let h = header(i);
            let at = u32_at(h) as usize;
            let end = names[at..].iter().position(|&c| c == 0).unwrap() + at;
            Section {
                name: String::from_utf8_lossy(&names[at..end]).into_owned(),
                kind: u32_at(h + 4),
                flags: u64_at(h + 8),
                data: data(h),
            }
        })
        .collect()
}

/// The GNU build ID (hex) of the ELF file at `path`, from its `.note.gnu.build-id`.
fn build_id(path: &Path) -> Option<String> {
    let note = sections(path)
        .into_iter()
        .find(|s| s.name == ".note.gnu.build-id")?
        .data;
    // namesz, descsz, type, "GNU\0", then the descriptor: the ID.
    let descsz = u32::from_le_bytes(note[4..8].try_into().unwrap()) as usize;
    assert_eq!(
        &note[12..16],
        b"GNU\0",
        "{}: odd build-id note",
        path.display()
    );
    Some(
        note[16..16 + descsz]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// Debug info: the DWARF sections (`.debug_*`, not loaded at run time; `.debug_gdb_scripts`
/// is loaded and holds only a script's name) and the symbol table.
fn debug_sections(path: &Path) -> Vec<String> {
    sections(path)
        .into_iter()
        .filter(|s| {
            s.kind == SHT_SYMTAB || s.name.starts_with(".debug") && s.flags & SHF_ALLOC == 0
        })
        .map(|s| s.name)
        .collect()
}

/// What an installed ffsck must be: stripped, with a link to its separate debug info, small
/// enough for an initramfs, and the built binary (same build ID).
fn assert_shipped_binary(installed: &Path, what: &str) {
    let size = std::fs::metadata(installed).unwrap().len();
    assert!(
        size <= MAX_INSTALLED_BYTES,
        "{what}: {} is {size} bytes, over {MAX_INSTALLED_BYTES}",
        installed.display()
    );
    let debug = debug_sections(installed);
    assert!(debug.is_empty(), "{what}: not stripped, has {debug:?}");
    assert!(
        sections(installed)
            .iter()
            .any(|s| s.name == ".gnu_debuglink" && s.data.starts_with(b"ffsck.debug\0")),
        "{what}: no .gnu_debuglink to ffsck.debug"
    );
    assert_eq!(
        build_id(installed),
        build_id(&ffsck_bin()),
        "{what}: not the built binary"
    );
    let (code, v, err) = run(Command::new(installed).arg("-V"));
    assert_eq!(code, 0, "{what}: -V: {err}");
    assert!(v.contains("(follows e2fsck 1.47.0)"), "{what}: -V: {v}");
}

/// The parser the checks rely on sees what readelf sees: the built binary (the release
/// profile keeps line tables) has debug sections and a symbol table.
#[test]
fn elf_sections_find_the_debug_info_of_the_built_binary() {
    let names: Vec<String> = sections(&ffsck_bin()).into_iter().map(|s| s.name).collect();
    for want in [".text", ".rodata", ".note.gnu.build-id"] {
        assert!(names.iter().any(|n| n == want), "no {want} in {names:?}");
    }
    let debug = debug_sections(&ffsck_bin());
    assert!(
        debug.iter().any(|n| n == ".debug_line") && debug.iter().any(|n| n == ".symtab"),
        "the release build lost its line tables or symbols (profiling needs them): {debug:?}"
    );
    assert_eq!(build_id(&ffsck_bin()).map(|id| id.len()), Some(40));
}

fn make(dest: &Path, gen: &Path, target: &str) -> (i32, String, String) {
    let Some(make) = need("make", "make") else {
        return (-1, String::new(), String::new());
    };
    run(Command::new(make)
        .arg("-C")
        .arg(repo_root())
        .arg(target)
        .arg(format!("DESTDIR={}", dest.display()))
        .arg("PREFIX=/usr")
        .arg(format!("FFSCK_BIN={}", ffsck_bin().display()))
        .arg(format!("GEN={}", gen.display())))
}

#[test]
fn make_install_links_and_uninstall() {
    let Some(t) = tools() else { return };
    if need("make", "make").is_none() || need("objcopy", "binutils").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("root");
    let gen = dir.path().join("gen");
    let (code, _, err) = make(&dest, &gen, "install");
    assert_eq!(code, 0, "make install: {err}");
    let usr = dest.join("usr");
    let expected = [
        "sbin/ffsck",
        "share/man/man8/ffsck.8.gz",
        "share/bash-completion/completions/ffsck",
        "share/zsh/site-functions/_ffsck",
        "share/fish/vendor_completions.d/ffsck.fish",
    ];
    for f in expected {
        assert!(usr.join(f).is_file(), "make install did not install {f}");
    }
    assert!(
        !usr.join("sbin/fsck.ext4").exists(),
        "links installed without asking"
    );
    assert_shipped_binary(&usr.join("sbin/ffsck"), "make install");

    // The debug info goes apart, where gdb and perf look for it by build ID.
    let (code, _, err) = make(&dest, &gen, "install-debug");
    assert_eq!(code, 0, "make install-debug: {err}");
    let id = build_id(&usr.join("sbin/ffsck")).unwrap();
    let debug_file = usr.join(format!(
        "lib/debug/.build-id/{}/{}.debug",
        &id[..2],
        &id[2..]
    ));
    let debug = debug_sections(&debug_file);
    assert!(
        debug.iter().any(|n| n == ".debug_line") && debug.iter().any(|n| n == ".symtab"),
        "{}: {debug:?}",
        debug_file.display()
    );

    let (code, _, err) = make(&dest, &gen, "install-fsck-links");
    assert_eq!(code, 0, "make install-fsck-links: {err}");
    let img = mkfs(&t, "ext4", &[], "8M");
    let (want_code, want_out, _) = run(Command::new(ffsck_bin()).arg("-fn").arg(&img.path));
    assert_eq!(want_code, 0, "{want_out}");
    for ty in ["ext2", "ext3", "ext4"] {
        let link = usr.join(format!("sbin/fsck.{ty}"));
        assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("ffsck"));
        let (code, out, err) = run(Command::new(&link).arg("-fn").arg(&img.path));
        assert_eq!((code, &out), (want_code, &want_out), "fsck.{ty} -fn: {err}");
        let (_, v, _) = run(Command::new(&link).arg("-V"));
        assert!(v.contains("(follows e2fsck"), "fsck.{ty} -V: {v}");
    }

    let (code, _, err) = make(&dest, &gen, "uninstall");
    assert_eq!(code, 0, "make uninstall: {err}");
    for f in expected
        .iter()
        .copied()
        .chain(["sbin/fsck.ext2", "sbin/fsck.ext3", "sbin/fsck.ext4"])
        .chain([debug_file.strip_prefix(&usr).unwrap().to_str().unwrap()])
    {
        assert!(
            usr.join(f).symlink_metadata().is_err(),
            "make uninstall left {f}"
        );
    }
}

#[test]
fn deb_builds_unpacks_and_runs_under_util_linux_fsck() {
    let Some(t) = tools() else { return };
    for (tool, pkg) in [
        ("dpkg-deb", "dpkg"),
        ("dpkg", "dpkg"),
        ("make", "make"),
        ("objcopy", "binutils"),
        ("file", "file"),
    ] {
        if need(tool, pkg).is_none() {
            return;
        }
    }
    if !String::from_utf8_lossy(
        &Command::new("file")
            .arg("-L")
            .arg(ffsck_bin())
            .output()
            .unwrap()
            .stdout,
    )
    .contains("static")
    {
        common::skip("SKIPPED: the .deb needs the static build (scripts/build-env.sh)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(Command::new(repo_root().join("scripts/deb.sh"))
        .arg(dir.path().join("out"))
        .env("FFSCK_BIN", ffsck_bin()));
    assert_eq!(code, 0, "scripts/deb.sh: {err}");
    let deb = PathBuf::from(out.trim());
    assert!(deb.is_file(), "no .deb at {out}");

    let (code, list, err) = run(Command::new("dpkg-deb").arg("-c").arg(&deb));
    assert_eq!(code, 0, "{err}");
    for f in [
        "./usr/sbin/ffsck",
        "./usr/share/man/man8/ffsck.8.gz",
        "./usr/share/bash-completion/completions/ffsck",
        "./usr/share/zsh/site-functions/_ffsck",
        "./usr/share/fish/vendor_completions.d/ffsck.fish",
        "./usr/share/doc/ffsck/copyright",
    ] {
        assert!(
            list.lines().any(|l| l.ends_with(f)),
            "the .deb lacks {f}:\n{list}"
        );
    }
    assert!(
        !list.contains("fsck.ext"),
        "the .deb ships fsck links:\n{list}"
    );
    let (_, control, _) = run(Command::new("dpkg-deb").args(["-f"]).arg(&deb));
    for field in [
        "Package: ffsck",
        "Section: admin",
        "Suggests: e2fsprogs",
        &format!("Version: {}", env!("CARGO_PKG_VERSION")),
    ] {
        assert!(control.contains(field), "control lacks {field}:\n{control}");
    }
    assert!(
        !control.contains("Depends:"),
        "static binary, no Depends:\n{control}"
    );

    let root = dir.path().join("root");
    let (code, _, err) = run(Command::new("dpkg").arg("-x").arg(&deb).arg(&root));
    assert_eq!(code, 0, "dpkg -x: {err}");
    let sbin = root.join("usr/sbin");
    assert_shipped_binary(&sbin.join("ffsck"), "the .deb");

    // util-linux fsck (2.3x) looks for fsck.TYPE in $PATH's directories (only without PATH in
    // its default /sbin), so a scratch sbin first in PATH wins over e2fsprogs' fsck.ext4.
    let Some(fsck) = need("fsck", "util-linux") else {
        return;
    };
    std::os::unix::fs::symlink("ffsck", sbin.join("fsck.ext4")).unwrap();
    let img = mkfs(&t, "ext4", &[], "8M");
    let json = dir.path().join("fsck.json");
    let path = format!(
        "{}:{}",
        sbin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Everything after `--` goes to the checker: --json is a flag only ffsck has.
    let (code, out, err) = run(Command::new(&fsck)
        .args(["-t", "ext4", "-fn"])
        .arg(&img.path)
        .arg("--")
        .arg("--json")
        .arg(&json)
        .env("PATH", &path));
    assert_eq!(code, 0, "fsck -t ext4 -fn: {out}{err}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap_or_else(|e| {
            panic!("fsck -t ext4 did not run ffsck (no --json report: {e}):\n{out}{err}")
        }))
        .unwrap();
    assert!(report.is_object(), "{report}");
    let (_, shown, _) = run(Command::new(&fsck)
        .args(["-t", "ext4", "-N"])
        .arg(&img.path)
        .env("PATH", &path));
    assert!(
        shown.contains(&sbin.join("fsck.ext4").display().to_string()),
        "fsck -N would run another checker:\n{shown}"
    );
}
