//! The option table: every option any client takes, declared once.
//!
//! Per option: our (snake_case) name, the Java / librdkafka dotted names it
//! is also known by, its type, default, valid range or choices, which clients
//! take it, and what it fills in the core's config structs ([`Effect`]).
//! Validation of a single value ([`Constraint::coerce`]) happens here and
//! nowhere else; the Python layer (`_config.py`) only merges arguments,
//! normalises names with [`lookup`] and applies the cross-option rules that
//! depend on what the user set explicitly. [`build`] turns a resolved set of
//! values into the config structs, so which field an option fills is also
//! written down once.

use std::fmt::Write as _;

pub mod build;
mod table;
#[cfg(test)]
mod tests;

pub use build::{build, Effective, Resolved};
pub use table::OPTIONS;

/// How a value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Bool,
    Str,
    /// `host:port`, a comma-separated string of them or a list.
    Servers,
    /// A comma-separated string or a list of strings.
    StrList,
    /// Java's `acks`: "all", "-1", "0", "1" (librdkafka users pass ints).
    Acks,
    /// A string compared case-insensitively (Java's CaseInsensitiveValidString).
    Upper,
    /// A string never shown in messages (passwords).
    Secret,
    /// A boolean, or the values of `ssl.endpoint.identification.algorithm`.
    CheckHostname,
    /// A Python callable; held by the bindings, only its presence reaches here.
    Callable,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Int,
        Kind::Float,
        Kind::Bool,
        Kind::Str,
        Kind::Servers,
        Kind::StrList,
        Kind::Acks,
        Kind::Upper,
        Kind::Secret,
        Kind::CheckHostname,
        Kind::Callable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Bool => "bool",
            Kind::Str => "str",
            Kind::Servers => "servers",
            Kind::StrList => "str_list",
            Kind::Acks => "acks",
            Kind::Upper => "upper",
            Kind::Secret => "secret",
            Kind::CheckHostname => "check_hostname",
            Kind::Callable => "callable",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Int => "an integer",
            Kind::Float => "a number",
            Kind::Bool => "a boolean",
            Kind::Str | Kind::Upper | Kind::Secret => "a string",
            Kind::Servers => "'host:port,...' or a list of 'host:port'",
            Kind::StrList => "a comma-separated string or a list of strings",
            Kind::Acks => "'all', '-1', '0' or '1'",
            Kind::CheckHostname => "a boolean, 'https' or 'none'",
            Kind::Callable => "a callable",
        }
    }
}

/// The clients (and the low-level classes) that take options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Producer,
    Consumer,
    Admin,
    NetworkClient,
    Metadata,
    ProducerMetadata,
    /// KIP-932 share groups (`share::client::ShareConsumer`).
    ShareConsumer,
}

impl Client {
    pub const ALL: [Client; 7] = [
        Client::Producer,
        Client::Consumer,
        Client::Admin,
        Client::NetworkClient,
        Client::Metadata,
        Client::ProducerMetadata,
        Client::ShareConsumer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Client::Producer => "Producer",
            Client::Consumer => "Consumer",
            Client::Admin => "Admin",
            Client::NetworkClient => "NetworkClient",
            Client::Metadata => "Metadata",
            Client::ProducerMetadata => "ProducerMetadata",
            Client::ShareConsumer => "ShareConsumer",
        }
    }

    pub fn from_name(s: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.name() == s)
    }

    pub const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A default value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Default {
    /// The option must be given.
    Required,
    Null,
    Int(i64),
    Bool(bool),
    Str(&'static str),
    List(&'static [&'static str]),
}

impl Default {
    pub fn value(self) -> Option<Value> {
        Some(match self {
            Default::Required => return None,
            Default::Null => Value::Null,
            Default::Int(i) => Value::Int(i),
            Default::Bool(b) => Value::Bool(b),
            Default::Str(s) => Value::Str(s.into()),
            Default::List(l) => Value::List(l.iter().map(|s| s.to_string()).collect()),
        })
    }
}

/// What setting an option does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Fills these fields of the core's config structs (names as
    /// [`Effective::fields`] lists them; a client fills those of its structs).
    Core(&'static [&'static str]),
    /// Used by the Python layer, in the place named.
    Python(&'static str),
    /// Refused (OptionNotSupportedError) when set to anything but its default.
    Refused(&'static str),
}

/// One option.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    /// The Java (or librdkafka) dotted name.
    pub java: &'static str,
    /// Further accepted spellings.
    pub aliases: &'static [&'static str],
    pub kind: Kind,
    pub default: Default,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub choices: &'static [&'static str],
    pub nullable: bool,
    /// Bitset of [`Client::bit`].
    pub clients: u8,
    /// A lower bound for the low-level `Metadata` classes only, which tests
    /// drive with injected time (None: `min`).
    pub low_level_min: Option<i64>,
    /// Other options this one needs to take effect (e.g. SASL settings need
    /// a SASL security protocol), as (option, values) pairs: values are
    /// `|`-separated, `*` is any value but None.
    pub needs: &'static [(&'static str, &'static str)],
    pub effect: Effect,
    pub doc: &'static str,
}

impl Spec {
    pub fn takes(&self, client: Client) -> bool {
        self.clients & client.bit() != 0
    }

    pub fn clients(&self) -> impl Iterator<Item = Client> + '_ {
        Client::ALL.into_iter().filter(|c| self.takes(*c))
    }

    /// The value check for this option as `client` takes it.
    pub fn constraint(&self, client: Option<Client>) -> Constraint<'static> {
        let low_level = matches!(client, Some(Client::Metadata | Client::ProducerMetadata));
        Constraint {
            kind: self.kind,
            min: if low_level {
                self.low_level_min.or(self.min)
            } else {
                self.min
            },
            max: self.max,
            choices: self.choices,
            nullable: self.nullable,
        }
    }

    /// Every name this option is accepted under.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        [self.name, self.java]
            .into_iter()
            .chain(self.aliases.iter().copied())
    }
}

/// The option named `key` (our name, its dotted name or an alias).
pub fn lookup(key: &str) -> Option<&'static Spec> {
    OPTIONS.iter().find(|o| o.names().any(|n| n == key))
}

/// A value as the caller gave it (the bindings translate Python objects).
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    Null,
    Int(i64),
    /// An integer outside i64.
    BigInt,
    Float(f64),
    Bool(bool),
    Str(String),
    List(Vec<Raw>),
    Callable,
    /// Anything else.
    Other,
}

/// A checked value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    List(Vec<String>),
    /// A callable held by the bindings.
    Object,
}

/// Type, range and choices of one option.
#[derive(Debug, Clone, Copy)]
pub struct Constraint<'a> {
    pub kind: Kind,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub choices: &'a [&'a str],
    pub nullable: bool,
}

impl Constraint<'_> {
    /// What the option accepts, for error messages and the docs page.
    pub fn accepted(&self) -> String {
        let mut t = String::new();
        if !self.choices.is_empty() {
            t.push_str("one of ");
            for (i, c) in self.choices.iter().enumerate() {
                let _ = write!(t, "{}'{c}'", if i > 0 { ", " } else { "" });
            }
        } else {
            t.push_str(self.kind.describe());
            match (self.min, self.max) {
                (Some(lo), Some(hi)) => {
                    let _ = write!(t, " in [{lo}, {hi}]");
                }
                (Some(lo), None) => {
                    let _ = write!(t, " >= {lo}");
                }
                (None, Some(hi)) => {
                    let _ = write!(t, " <= {hi}");
                }
                (None, None) => {}
            }
        }
        if self.nullable {
            t.push_str(" or None");
        }
        t
    }

    /// The checked value, or `Err(())` when `raw` is not acceptable (the
    /// caller names the key and [`Constraint::accepted`]).
    #[allow(clippy::result_unit_err)]
    pub fn coerce(&self, raw: &Raw) -> Result<Value, ()> {
        if *raw == Raw::Null {
            return if self.nullable {
                Ok(Value::Null)
            } else {
                Err(())
            };
        }
        let v = match self.kind {
            Kind::Int => Value::Int(int(raw)?),
            Kind::Float => Value::Float(match raw {
                Raw::Int(i) => *i as f64,
                Raw::Float(f) => *f,
                Raw::Str(s) => s.trim().parse().map_err(|_| ())?,
                _ => return Err(()),
            }),
            Kind::Bool => Value::Bool(match raw {
                Raw::Bool(b) => *b,
                // Dicts read from properties files carry strings.
                Raw::Str(s) if s.eq_ignore_ascii_case("true") => true,
                Raw::Str(s) if s.eq_ignore_ascii_case("false") => false,
                _ => return Err(()),
            }),
            Kind::Str | Kind::Secret => Value::Str(string(raw)?.to_string()),
            Kind::Upper => Value::Str(string(raw)?.trim().to_ascii_uppercase()),
            Kind::StrList => Value::List(str_list(raw)?),
            Kind::Servers => {
                let list = str_list(raw)?;
                for s in &list {
                    let (host, port) = s.rsplit_once(':').ok_or(())?;
                    let ok_port = !port.is_empty()
                        && port.bytes().all(|b| b.is_ascii_digit())
                        && port.parse::<u32>().is_ok_and(|p| (1..65536).contains(&p));
                    if host.is_empty() || !ok_port {
                        return Err(());
                    }
                }
                Value::List(list)
            }
            Kind::Acks => {
                let s = match raw {
                    Raw::Int(i) => i.to_string(),
                    Raw::Str(s) => s.trim().to_ascii_lowercase(),
                    _ => return Err(()),
                };
                Value::Str(if s == "-1" { "all".into() } else { s })
            }
            Kind::CheckHostname => Value::Bool(match raw {
                Raw::Bool(b) => *b,
                Raw::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
                    "https" | "true" => true,
                    "" | "none" | "false" => false,
                    _ => return Err(()),
                },
                _ => return Err(()),
            }),
            Kind::Callable => match raw {
                Raw::Callable => Value::Object,
                _ => return Err(()),
            },
        };
        if !self.choices.is_empty() {
            let ok = match &v {
                Value::Str(s) => self.choices.contains(&s.as_str()),
                Value::List(l) => {
                    !l.is_empty() && l.iter().all(|s| self.choices.contains(&s.as_str()))
                }
                _ => false,
            };
            if !ok {
                return Err(());
            }
        }
        let n = match v {
            Value::Int(i) => Some(i as f64),
            Value::Float(f) => Some(f),
            _ => None,
        };
        if let Some(n) = n {
            if self.min.is_some_and(|lo| n < lo as f64) || self.max.is_some_and(|hi| n > hi as f64)
            {
                return Err(());
            }
        }
        Ok(v)
    }
}

fn int(raw: &Raw) -> Result<i64, ()> {
    match raw {
        Raw::Int(i) => Ok(*i),
        Raw::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(*f as i64),
        Raw::Str(s) => s.trim().parse().map_err(|_| ()),
        _ => Err(()),
    }
}

fn string(raw: &Raw) -> Result<&str, ()> {
    match raw {
        Raw::Str(s) => Ok(s),
        _ => Err(()),
    }
}

fn str_list(raw: &Raw) -> Result<Vec<String>, ()> {
    let items: Vec<String> = match raw {
        Raw::Str(s) => s.split(',').map(|s| s.trim().to_string()).collect(),
        Raw::List(l) => l
            .iter()
            .map(|r| string(r).map(|s| s.trim().to_string()))
            .collect::<Result<_, _>>()?,
        _ => return Err(()),
    };
    let items: Vec<String> = items.into_iter().filter(|s| !s.is_empty()).collect();
    if items.is_empty() {
        return Err(());
    }
    Ok(items)
}
