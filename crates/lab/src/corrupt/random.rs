//! `corrupt --random N`: N corruptions drawn with the seed from every mode (field-addressed
//! with a random field and verb, component flips in a random group, semantic damage, and the
//! Table II operations), each logged in the one manifest.
//!
//! A draw that cannot be applied to this image (no htree, a field past the inode size, a
//! write that would change nothing) is replaced by another draw; the number of tries is
//! bounded so a hostile image cannot make the loop spin.

use anyhow::{bail, Result};
use clap::ValueEnum;
use ffsck_format::fields;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::table2::{corrupt_table2, Table2};
use super::{
    corrupt_component, corrupt_field, corrupt_semantic, Component, CsumMode, Image, Op, Semantic,
};

/// Draws per requested corruption before giving up.
const TRIES_PER_STEP: usize = 32;
/// Largest N accepted: each step scans part of the image.
pub const MAX_STEPS: u32 = 1000;

/// One applied draw: its name (as `--field`, `--component`… would spell it) and description.
pub struct Step {
    pub name: String,
    pub description: String,
}

const VERBS: [Op; 8] = [
    Op::Zero,
    Op::Ones,
    Op::Firstbit,
    Op::Middlebit,
    Op::Lastbit,
    Op::Add,
    Op::Sub,
    Op::Random,
];

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

/// A random field spec over the superblock, a descriptor or an inode of the first groups.
fn random_field(img: &Image, rng: &mut ChaCha8Rng) -> String {
    match rng.random_range(0..3) {
        0 => format!("sb.{}", pick(rng, fields::SUPERBLOCK).0),
        1 => {
            let g = rng.random_range(0..img.group_count());
            format!("gd[{g}].{}", pick(rng, fields::GROUP_DESC).0)
        }
        _ => {
            let last = img
                .geo
                .inodes_count
                .min(img.geo.first_ino.saturating_add(2000));
            let ino = rng.random_range(1..=last.max(1));
            format!("inode[{ino}].{}", pick(rng, fields::INODE).0)
        }
    }
}

/// Applies `n` random corruptions. `csum` overrides each mode's default checksum handling.
pub(super) fn corrupt_random(
    img: &mut Image,
    n: u32,
    csum: Option<CsumMode>,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<Step>> {
    if n == 0 || n > MAX_STEPS {
        bail!("--random takes 1..={MAX_STEPS} corruptions, not {n}");
    }
    let components = Component::value_variants();
    let semantics = Semantic::value_variants();
    let mut steps = Vec::new();
    for _ in 0..n {
        let mut done = false;
        for _ in 0..TRIES_PER_STEP {
            let (name, default_csum, result) = match rng.random_range(0..4) {
                0 => {
                    let spec = random_field(img, rng);
                    let op = pick(rng, &VERBS).clone();
                    let r = corrupt_field(img, &spec, &op, rng);
                    let op = serde_json::to_value(&op)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from));
                    (
                        format!("field {spec} {}", op.unwrap_or_default()),
                        CsumMode::Stale,
                        r,
                    )
                }
                1 => {
                    let c = *pick(rng, components);
                    let g = rng.random_range(0..img.group_count());
                    let r = corrupt_component(img, c, g, rng);
                    (format!("component {c:?} group {g}"), CsumMode::Stale, r)
                }
                2 => {
                    let s = *pick(rng, semantics);
                    let r = corrupt_semantic(img, s, rng);
                    (format!("semantic {s:?}"), CsumMode::Fix, r)
                }
                _ => {
                    let t = *pick(rng, &Table2::ALL);
                    let r = corrupt_table2(img, t, rng);
                    (format!("table2 {}", t.name()), CsumMode::Fix, r)
                }
            };
            match result {
                Ok(description) => {
                    if csum.unwrap_or(default_csum) == CsumMode::Fix {
                        img.fix_checksums()?;
                    } else {
                        img.dirty.clear();
                    }
                    steps.push(Step { name, description });
                    done = true;
                    break;
                }
                // A failed draw wrote nothing (every mode checks before it writes, and a
                // partial semantic write is still logged), so simply draw again.
                Err(_) => img.dirty.clear(),
            }
        }
        if !done {
            bail!(
                "no applicable corruption found in {TRIES_PER_STEP} draws after {} steps",
                steps.len()
            );
        }
    }
    Ok(steps)
}
