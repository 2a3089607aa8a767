-- ITCH 5.0 (NASDAQ TotalView-ITCH) for Wireshark: the market data that
-- lockstep's matchers publish, one ITCH message per MoldUDP64 message
-- block, and GLIMPSE 5.0's End of Snapshot ('G', no common header).
-- Wireshark's own nasdaq_itch dissector knows ITCH 2.0/3.0 (ASCII) only.
--
-- The layouts are common/itch.h's, and so are the rules: a message whose
-- length is not its type's, an unknown type, a side other than B/S, a
-- printable other than Y/N, an alpha byte outside 0x20-0x7E, an alpha
-- field that is not left-justified, an empty stock or an End of Snapshot
-- that is not 1..20 digits (no leading zero, within a u64) gets an expert
-- info of severity error (group malformed): filter with
--   _ws.expert.severity >= error
--
-- MoldUDP64's payload table is a "Decode As" table with no selector, and
-- Lua cannot make a dissector its default; name it on the command line:
--   tshark -X lua_script:itch50.lua -d udp.port==PORT,moldudp64 \
--          -d moldudp64.payload,lockstep_itch -r feed.pcap
-- or copy this file to ~/.local/lib/wireshark/plugins/ and choose
-- Analyze > Decode As... > MoldUDP64 Payload > LOCKSTEP_ITCH.

local itch = Proto("lockstep_itch", "ITCH 5.0")

local type_names = {
	[0x53] = "System Event", [0x52] = "Stock Directory", [0x48] = "Stock Trading Action",
	[0x41] = "Add Order", [0x46] = "Add Order with MPID", [0x45] = "Order Executed",
	[0x43] = "Order Executed With Price", [0x58] = "Order Cancel", [0x44] = "Order Delete",
	[0x55] = "Order Replace", [0x50] = "Trade", [0x47] = "End of Snapshot",
}
local event_names = {
	[0x4f] = "Start of Messages", [0x53] = "Start of System Hours",
	[0x51] = "Start of Market Hours", [0x4d] = "End of Market Hours",
	[0x45] = "End of System Hours", [0x43] = "End of Messages",
}
local side_names = { [0x42] = "Buy", [0x53] = "Sell" }
local yn_names = { [0x59] = "Yes", [0x4e] = "No" }
local state_names = {
	[0x48] = "Halted", [0x50] = "Paused", [0x51] = "Quotation only", [0x54] = "Trading",
}

local F = {
	type = ProtoField.char("lockstep_itch.type", "Message Type", base.NONE, type_names),
	locate = ProtoField.uint16("lockstep_itch.locate", "Stock Locate", base.DEC),
	tracking = ProtoField.uint16("lockstep_itch.tracking", "Tracking Number", base.DEC),
	timestamp = ProtoField.uint64("lockstep_itch.timestamp", "Timestamp (ns since midnight)",
		base.DEC),
	event_code = ProtoField.char("lockstep_itch.event_code", "Event Code", base.NONE,
		event_names),
	stock = ProtoField.string("lockstep_itch.stock", "Stock"),
	market_category = ProtoField.char("lockstep_itch.market_category", "Market Category"),
	financial_status = ProtoField.char("lockstep_itch.financial_status",
		"Financial Status Indicator"),
	round_lot_size = ProtoField.uint32("lockstep_itch.round_lot_size", "Round Lot Size",
		base.DEC),
	round_lots_only = ProtoField.char("lockstep_itch.round_lots_only", "Round Lots Only"),
	issue_classification = ProtoField.char("lockstep_itch.issue_classification",
		"Issue Classification"),
	issue_subtype = ProtoField.string("lockstep_itch.issue_subtype", "Issue Sub-Type"),
	authenticity = ProtoField.char("lockstep_itch.authenticity", "Authenticity"),
	short_sale_threshold = ProtoField.char("lockstep_itch.short_sale_threshold",
		"Short Sale Threshold Indicator"),
	ipo_flag = ProtoField.char("lockstep_itch.ipo_flag", "IPO Flag"),
	luld_tier = ProtoField.char("lockstep_itch.luld_tier", "LULD Reference Price Tier"),
	etp_flag = ProtoField.char("lockstep_itch.etp_flag", "ETP Flag"),
	etp_leverage = ProtoField.uint32("lockstep_itch.etp_leverage", "ETP Leverage Factor",
		base.DEC),
	inverse = ProtoField.char("lockstep_itch.inverse", "Inverse Indicator"),
	state = ProtoField.char("lockstep_itch.state", "Trading State", base.NONE, state_names),
	reserved = ProtoField.char("lockstep_itch.reserved", "Reserved"),
	reason = ProtoField.string("lockstep_itch.reason", "Reason"),
	ref = ProtoField.uint64("lockstep_itch.ref", "Order Reference Number", base.DEC),
	side = ProtoField.char("lockstep_itch.side", "Buy/Sell Indicator", base.NONE, side_names),
	shares = ProtoField.uint32("lockstep_itch.shares", "Shares", base.DEC),
	price = ProtoField.uint32("lockstep_itch.price", "Price (4 implied decimals)", base.DEC),
	attribution = ProtoField.string("lockstep_itch.attribution", "Attribution (MPID)"),
	match = ProtoField.uint64("lockstep_itch.match", "Match Number", base.DEC),
	printable = ProtoField.char("lockstep_itch.printable", "Printable", base.NONE, yn_names),
	old_ref = ProtoField.uint64("lockstep_itch.old_ref", "Original Order Reference Number",
		base.DEC),
	new_ref = ProtoField.uint64("lockstep_itch.new_ref", "New Order Reference Number",
		base.DEC),
	seq = ProtoField.uint64("lockstep_itch.seq", "Sequence Number (next on the live feed)",
		base.DEC),
}
local fields = {}
for _, f in pairs(F) do
	fields[#fields + 1] = f
end
itch.fields = fields

local function bad(abbr, text)
	return ProtoExpert.new("lockstep_itch." .. abbr, text, expert.group.MALFORMED,
		expert.severity.ERROR)
end
local E = {
	type = bad("unknown_type", "Unknown ITCH 5.0 message type"),
	length = bad("bad_length", "Wrong length for the message type"),
	side = bad("bad_side", "Side is not B or S"),
	printable = bad("bad_printable", "Printable is not Y or N"),
	alpha = bad("bad_alpha", "Alpha field unprintable, not left-justified or empty"),
	seq = bad("bad_seq", "End of Snapshot sequence number is not 1..20 digits"),
}
itch.experts = { E.type, E.length, E.side, E.printable, E.alpha, E.seq }

-- Each type's fields after the 11-byte common header: the field, its kind
-- (u32, u64, price, stock, alpha, chr, side, yn) and width.
local function fld(f, kind, width)
	return { f = f, kind = kind, width = width }
end
local U32 = function(f) return fld(f, "u32", 4) end
local U64 = function(f) return fld(f, "u64", 8) end
local PRICE = fld(F.price, "price", 4)
local STOCK = fld(F.stock, "stock", 8)
local CHR = function(f) return fld(f, "chr", 1) end
local SIDE = fld(F.side, "side", 1)

local layouts = {
	S = { len = 12, CHR(F.event_code) },
	R = { len = 39, STOCK, CHR(F.market_category), CHR(F.financial_status),
		U32(F.round_lot_size), CHR(F.round_lots_only), CHR(F.issue_classification),
		fld(F.issue_subtype, "alpha", 2), CHR(F.authenticity),
		CHR(F.short_sale_threshold), CHR(F.ipo_flag), CHR(F.luld_tier), CHR(F.etp_flag),
		U32(F.etp_leverage), CHR(F.inverse) },
	H = { len = 25, STOCK, CHR(F.state), CHR(F.reserved), fld(F.reason, "alpha", 4) },
	A = { len = 36, U64(F.ref), SIDE, U32(F.shares), STOCK, PRICE },
	F = { len = 40, U64(F.ref), SIDE, U32(F.shares), STOCK, PRICE,
		fld(F.attribution, "alpha", 4) },
	E = { len = 31, U64(F.ref), U32(F.shares), U64(F.match) },
	C = { len = 36, U64(F.ref), U32(F.shares), U64(F.match), fld(F.printable, "yn", 1),
		PRICE },
	X = { len = 23, U64(F.ref), U32(F.shares) },
	D = { len = 19, U64(F.ref) },
	U = { len = 35, U64(F.old_ref), U64(F.new_ref), U32(F.shares), PRICE },
	P = { len = 44, U64(F.ref), SIDE, U32(F.shares), STOCK, PRICE, U64(F.match) },
	G = { len = 21 },
}

local HDR_LEN = 11
local SEQ_DIGITS = 20
local U64_MAX_DIGITS = "18446744073709551615"

local function printable(b)
	return b >= 0x20 and b <= 0x7e
end

-- The alpha field's value trimmed of trailing spaces, and whether it
-- breaks a rule (unprintable, a space before a non-space, empty stock).
local function alpha(raw, kind)
	local ok = true
	for i = 1, #raw do
		local b = raw:byte(i)
		if not printable(b) then
			ok = false
		elseif i > 1 and raw:byte(i - 1) == 0x20 and b ~= 0x20 then
			ok = false
		end
	end
	if kind == "stock" and (#raw == 0 or raw:byte(1) == 0x20) then
		ok = false
	end
	local value = raw:gsub(" +$", "")
	value = value:gsub("[^\32-\126]", "?")
	return value, ok
end

local function price_text(p)
	return string.format("%d.%04d", math.floor(p / 10000), p % 10000)
end

local function time_text(ns)
	local s = math.floor(ns / 1e9)
	return string.format("%02d:%02d:%02d.%09d", math.floor(s / 3600), math.floor(s / 60) % 60,
		s % 60, ns - s * 1e9)
end

-- The body's fields, only those that fit in the message; a summary of the
-- message for the Info column.
local function dissect_body(tvb, tree, lay)
	local off, len = HDR_LEN, tvb:len()
	local info = {}
	for _, d in ipairs(lay) do
		if off + d.width > len then
			break
		end
		local r = tvb(off, d.width)
		local item
		if d.kind == "u32" then
			item = tree:add(d.f, r)
		elseif d.kind == "u64" then
			item = tree:add(d.f, r)
		elseif d.kind == "price" then
			item = tree:add(d.f, r)
			item:append_text(" (" .. price_text(r:uint()) .. ")")
			info[#info + 1] = "@" .. price_text(r:uint())
		elseif d.kind == "stock" or d.kind == "alpha" then
			local value, ok = alpha(r:raw(), d.kind)
			item = tree:add(d.f, r, value)
			if not ok then
				item:add_proto_expert_info(E.alpha)
			end
			if d.kind == "stock" then
				info[#info + 1] = value
			end
		else -- chr, side, yn
			local b = r:uint()
			item = tree:add(d.f, r)
			if d.kind == "side" then
				if b ~= 0x42 and b ~= 0x53 then
					item:add_proto_expert_info(E.side)
				end
				info[#info + 1] = string.char(printable(b) and b or 0x3f)
			elseif d.kind == "yn" then
				if b ~= 0x59 and b ~= 0x4e then
					item:add_proto_expert_info(E.printable)
				end
			elseif not printable(b) then
				item:add_proto_expert_info(E.alpha)
			end
		end
		if d.f == F.event_code or d.f == F.state then
			info[#info + 1] = string.char(printable(r:uint()) and r:uint() or 0x3f)
		elseif d.f == F.shares then
			info[#info + 1] = tostring(r:uint())
		elseif d.f == F.ref then
			info[#info + 1] = "ref " .. tostring(r:uint64())
		end
		off = off + d.width
	end
	return table.concat(info, " ")
end

-- End of Snapshot: 1 to 20 digits, then spaces; no leading zero (the
-- encoder never writes one); within a u64.
local function dissect_end_of_snapshot(tvb, tree)
	if tvb:len() < 1 + SEQ_DIGITS then
		return ""
	end
	local r = tvb(1, SEQ_DIGITS)
	local raw = r:raw()
	local digits = raw:match("^[0-9]*")
	local rest = raw:sub(#digits + 1)
	local ok = #digits >= 1 and rest:match("^ *$") ~= nil and
		not (#digits > 1 and digits:sub(1, 1) == "0") and
		(#digits < SEQ_DIGITS or digits <= U64_MAX_DIGITS)
	if not ok then
		local item = tree:add(r, "Sequence Number: " .. raw:gsub("[^\32-\126]", "?"))
		item:add_proto_expert_info(E.seq)
		return "invalid"
	end
	local v = UInt64(0)
	for i = 1, #digits do
		v = v * 10 + (digits:byte(i) - 0x30)
	end
	tree:add(F.seq, r, v)
	return "next seq " .. digits
end

function itch.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	if len == 0 then
		return 0
	end
	local t = tvb(0, 1):uint()
	local tname = type_names[t]
	local lay = layouts[string.char(t)]
	local sub = tree:add(itch, tvb(), "ITCH 5.0, " .. (tname or "Unknown"))
	pinfo.cols.protocol:set("ITCH 5.0")
	local titem = sub:add(F.type, tvb(0, 1))
	if not lay then
		titem:add_proto_expert_info(E.type)
		pinfo.cols.info:append(string.format(" [ITCH unknown type 0x%02x]", t))
		return len
	end
	if len ~= lay.len then
		sub:add_proto_expert_info(E.length,
			string.format("%s is %d bytes, not %d", tname, lay.len, len))
	end
	local summary
	if t == 0x47 then
		summary = dissect_end_of_snapshot(tvb, sub)
	else
		if len >= HDR_LEN then
			sub:add(F.locate, tvb(1, 2))
			sub:add(F.tracking, tvb(3, 2))
			local ts = tvb(5, 6):uint64()
			sub:add(F.timestamp, tvb(5, 6), ts):append_text(" (" ..
				time_text(ts:tonumber()) .. ")")
		end
		summary = dissect_body(tvb, sub, lay)
	end
	sub:append_text(" " .. summary)
	pinfo.cols.info:append(string.format(" [%s %s]", string.char(t), summary))
	return len
end

-- Offered in Decode As for MoldUDP64's payload (see the top of this file).
DissectorTable.get("moldudp64.payload"):add_for_decode_as(itch)
