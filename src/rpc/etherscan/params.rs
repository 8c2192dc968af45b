//! An Etherscan call's parameters: the query string of a GET, the query string and form body of
//! a POST, by name (the last value of a name wins, as a form's does; names match whatever their
//! case, as Etherscan's do — client libraries send `gasPrice` and `apiKey`), and their checks.

use std::collections::HashMap;

use alloy_primitives::Address;

use super::envelope::{reasons, Answer};

/// The parameters of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(HashMap<String, String>);

/// The rows a list call asked for: `page` (from 1) of `offset` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Rows before the page.
    pub skip: u64,
    /// Rows in the page.
    pub rows: u64,
}

/// The order a list is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Oldest first.
    Asc,
    /// Newest first.
    Desc,
}

impl Window {
    /// The positions `(first, count)` of the page among the list's positions `from..to`, read in
    /// `sort`'s order (a descending page is taken from the end; its rows are to be reversed).
    pub fn positions(self, sort: Sort, from: u64, to: u64) -> (u64, u64) {
        let len = to.saturating_sub(from);
        if self.skip >= len {
            return (from, 0);
        }
        let count = self.rows.min(len - self.skip);
        match sort {
            Sort::Asc => (from + self.skip, count),
            Sort::Desc => (to - self.skip - count, count),
        }
    }
}

impl Params {
    /// The parameters in `encoded` pieces (`a=1&b=2`), later ones overriding earlier.
    pub fn parse<'a>(encoded: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut map = HashMap::new();
        for piece in encoded {
            for (name, value) in form_urlencoded::parse(piece) {
                map.insert(name.to_ascii_lowercase(), value.into_owned());
            }
        }
        Self(map)
    }

    /// The value of `name`, if given and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        let value = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            self.0.get(&name.to_ascii_lowercase())
        } else {
            self.0.get(name)
        };
        value.map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// The address in `name`.
    pub fn address(&self, name: &str) -> Result<Address, Answer> {
        self.get(name).and_then(parse_address).ok_or_else(|| Answer::refuse(reasons::ADDRESS))
    }

    /// The comma-separated addresses in `name`, at most `most` of them.
    pub fn addresses(&self, name: &str, most: usize) -> Result<Vec<Address>, Answer> {
        let list = self.get(name).ok_or_else(|| Answer::refuse(reasons::ADDRESS))?;
        let addresses: Option<Vec<Address>> = list.split(',').map(|a| parse_address(a.trim())).collect();
        let addresses = addresses.ok_or_else(|| Answer::refuse(reasons::ADDRESS))?;
        if addresses.len() > most {
            return Err(Answer::refuse(format!("Error! Maximum of {most} addresses per call")));
        }
        Ok(addresses)
    }

    /// The page asked for: `page` from 1 (default 1), `offset` rows (default `default_rows`, at
    /// most `max_rows`). There is no cap on `page × offset`: every page of a list can be read.
    pub fn window(&self, default_rows: u64, max_rows: u64) -> Result<Window, Answer> {
        let number =
            |name: &str, default: u64| -> Result<u64, Answer> {
                match self.get(name) {
                    None => Ok(default),
                    Some(text) => text.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                        Answer::refuse(format!("Error! Invalid {name}: a whole number from 1"))
                    }),
                }
            };
        let page = number("page", 1)?;
        let rows = number("offset", default_rows.min(max_rows))?;
        if rows > max_rows {
            return Err(Answer::refuse(format!(
                "Error! offset {rows} is over this server's maximum of {max_rows} rows per page (see --etherscan-max-offset)"
            )));
        }
        let skip = (page - 1)
            .checked_mul(rows)
            .ok_or_else(|| Answer::refuse("Error! Invalid page: page × offset is out of range"))?;
        Ok(Window { skip, rows })
    }
}

impl Params {
    /// `sort`: `asc` or `desc`, `default` when not given.
    pub fn sort(&self, default: Sort) -> Result<Sort, Answer> {
        match self.get("sort") {
            None => Ok(default),
            Some(s) if s.eq_ignore_ascii_case("asc") => Ok(Sort::Asc),
            Some(s) if s.eq_ignore_ascii_case("desc") => Ok(Sort::Desc),
            Some(_) => Err(Answer::refuse("Error! Invalid sort: asc or desc")),
        }
    }

    /// What a list call asks for: its block range, its page (`offset` rows by default
    /// `default_rows`, at most `max_rows`) and its order (`default_sort` when not given).
    pub fn list_request(
        &self,
        default_rows: u64,
        max_rows: u64,
        default_sort: Sort,
    ) -> Result<((u64, u64), Window, Sort), Answer> {
        Ok((self.block_range()?, self.window(default_rows, max_rows)?, self.sort(default_sort)?))
    }

    /// The block range `startblock..=endblock` (decimal; `endblock` may be `latest`), all
    /// blocks when not given; a start after the end is refused.
    pub fn block_range(&self) -> Result<(u64, u64), Answer> {
        let bound = |name: &str, default: u64| -> Result<u64, Answer> {
            match self.get(name) {
                None => Ok(default),
                Some("latest") if name == "endblock" => Ok(u64::MAX),
                Some(text) => text
                    .parse::<u64>()
                    .map_err(|_| Answer::refuse(format!("Error! Invalid {name}: a block number in decimal"))),
            }
        };
        let (start, end) = (bound("startblock", 0)?, bound("endblock", u64::MAX)?);
        if start > end {
            return Err(Answer::refuse("Error! startblock is after endblock"));
        }
        Ok((start, end))
    }
}

/// `0x` and 40 hex digits, in any case (Etherscan does not check the checksum either).
fn parse_address(text: &str) -> Option<Address> {
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))?;
    if hex.len() != 40 {
        return None;
    }
    let mut bytes = [0u8; 20];
    alloy_primitives::hex::decode_to_slice(hex, &mut bytes).ok()?;
    Some(Address::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> Params {
        Params::parse([query.as_bytes()])
    }

    #[test]
    fn a_later_piece_overrides_and_values_are_decoded() {
        let p = Params::parse([
            b"module=token&action=x".as_slice(),
            b"action=tokenholderlist&a=%20b+c".as_slice(),
        ]);
        assert_eq!(p.get("module"), Some("token"));
        assert_eq!(p.get("action"), Some("tokenholderlist"));
        assert_eq!(p.get("a"), Some("b c"));
        assert_eq!(p.get("missing"), None);
    }

    #[test]
    fn names_match_in_any_case_and_values_keep_theirs() {
        let p = Params::parse([b"gasPrice=7&ContractAddress=0xAbC&fromblock=1".as_slice()]);
        assert_eq!(p.get("gasprice"), Some("7"));
        assert_eq!(p.get("contractaddress"), Some("0xAbC"));
        assert_eq!(p.get("fromBlock"), Some("1"));
        // Spelled two ways, the later wins, as one name given twice does.
        let p = Params::parse([b"apikey=a&apiKey=b".as_slice()]);
        assert_eq!(p.get("apikey"), Some("b"));
    }

    #[test]
    fn addresses_are_forty_hex_digits_in_any_case() {
        let lower = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed";
        let want: Address = lower.parse().expect("address");
        assert_eq!(params(&format!("address={lower}")).address("address"), Ok(want));
        assert_eq!(
            params(&format!("address={}", lower.to_uppercase().replace("0X", "0x"))).address("address"),
            Ok(want)
        );
        for bad in [
            "",
            "0x12",
            "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
            "0xzzaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        ] {
            assert_eq!(
                params(&format!("address={bad}")).address("address"),
                Err(Answer::refuse(reasons::ADDRESS)),
                "{bad:?}"
            );
        }
        let many = [lower; 3].join(",");
        assert_eq!(params(&format!("address={many}")).addresses("address", 3).map(|a| a.len()), Ok(3));
        assert!(params(&format!("address={many}")).addresses("address", 2).is_err());
    }

    #[test]
    fn a_window_is_a_page_of_offset_rows_without_a_cap_on_their_product() {
        assert_eq!(params("").window(100, 1000), Ok(Window { skip: 0, rows: 100 }));
        assert_eq!(params("page=3&offset=25").window(100, 1000), Ok(Window { skip: 50, rows: 25 }));
        assert_eq!(
            params("page=1001&offset=1000").window(100, 1000),
            Ok(Window { skip: 1_000_000, rows: 1000 })
        );
        for bad in ["page=0", "offset=0", "page=-1", "page=x", "offset=1001"] {
            assert!(params(bad).window(100, 1000).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_page_takes_its_positions_from_either_end() {
        let page = |skip, rows| Window { skip, rows };
        assert_eq!(page(0, 3).positions(Sort::Asc, 10, 20), (10, 3));
        assert_eq!(page(0, 3).positions(Sort::Desc, 10, 20), (17, 3));
        assert_eq!(page(9, 3).positions(Sort::Asc, 10, 20), (19, 1));
        assert_eq!(page(9, 3).positions(Sort::Desc, 10, 20), (10, 1));
        assert_eq!(page(10, 3).positions(Sort::Desc, 10, 20).1, 0);
        assert_eq!(page(0, 3).positions(Sort::Asc, 5, 5).1, 0);
    }

    #[test]
    fn sorts_and_block_ranges_are_checked() {
        assert_eq!(params("").sort(Sort::Desc), Ok(Sort::Desc));
        assert_eq!(params("sort=ASC").sort(Sort::Desc), Ok(Sort::Asc));
        assert!(params("sort=up").sort(Sort::Asc).is_err());
        assert_eq!(params("").block_range(), Ok((0, u64::MAX)));
        assert_eq!(params("startblock=5&endblock=latest").block_range(), Ok((5, u64::MAX)));
        assert_eq!(params("startblock=5&endblock=5").block_range(), Ok((5, 5)));
        assert_eq!(
            params("startblock=6&endblock=5").block_range(),
            Err(Answer::refuse("Error! startblock is after endblock"))
        );
        assert!(params("startblock=x").block_range().is_err());
    }
}
