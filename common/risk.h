/* Pre-trade risk limits as text and as numbers: the one syntax that the
 * matcher's configuration ([firm_limits], [user_limits]), lockstepctl risk
 * and lockstep-replay dump share, and the struct the engine checks orders
 * against (matcher/engine.h). Pure: no allocation, no clock, no logging.
 *
 * Text: space-separated key=value pairs, each limit at most once:
 *     max_qty=5000 max_notional=250000 collar=5% max_open=100 credit=1e6
 *   max_qty       shares per order (an integer)
 *   max_notional  dollars per order (price times shares), up to 4 decimals
 *   collar        how far from the symbol's reference price an order's price
 *                 may be: a percentage with up to 2 decimals ("5%", "0.25%")
 *                 or basis points ("25bp")
 *   max_open      open (resting) orders at once (an integer)
 *   credit        dollars: the gross open notional of the resting orders
 * A value "none" removes that limit (it is given, as 0). Dollars are held in
 * price units (1/10000 of a dollar), as OUCH prices are. */
#ifndef LOCKSTEP_RISK_H
#define LOCKSTEP_RISK_H

#include <stddef.h>
#include <stdint.h>

/* Bits of risk_limits.set: which limits are given. */
enum {
	RISK_MAX_QTY = 1u << 0,
	RISK_MAX_NOTIONAL = 1u << 1,
	RISK_COLLAR = 1u << 2,
	RISK_MAX_OPEN = 1u << 3,
	RISK_CREDIT = 1u << 4,
	RISK_ALL = (1u << 5) - 1,
};

/* A set of limits; a limit whose bit is clear is not given (another layer
 * decides it), one given as 0 is no limit. Numbered as lockstep.proto's
 * RiskLimits. */
struct risk_limits {
	uint32_t set;
	uint32_t max_qty;
	uint64_t max_notional; /* price units x shares */
	uint32_t collar_bp;
	uint32_t max_open;
	uint64_t credit; /* price units x shares */
};

/* Parses text into *out (zeroed first). 0, or -EINVAL with err saying
 * which word is wrong and why. An empty text gives no limits (set 0). */
int risk_limits_parse(const char *text, struct risk_limits *out, char *err, size_t errlen);

/* The limits given, as risk_limits_parse reads them back ("" when none);
 * snprintf's return. */
int risk_limits_format(const struct risk_limits *l, char *buf, size_t len);

/* lockstep.proto's RiskLimits (NULL: none given) into limits, and back. */
struct Lockstep__RiskLimits;
void risk_limits_from_pb(const struct Lockstep__RiskLimits *pb, struct risk_limits *out);
void risk_limits_to_pb(const struct risk_limits *l, struct Lockstep__RiskLimits *pb);

/* An operator's risk command (kind and scope numbered as lockstep.proto's
 * Admin) as the sequencer answers it and the matchers and lockstep-replay
 * log it: "user TRADR1: max_qty=1000", "firm FRMA: kill switch, open orders
 * canceled", "symbol AAPL: reference 150.2500"; snprintf's return. */
int risk_describe(char *buf, size_t len, uint32_t kind, uint32_t scope, const char *name,
		  int cancel, const struct risk_limits *l, uint32_t price);

/* A price in dollars with up to 4 decimals ("150", "150.25") into price
 * units; 0 or -EINVAL (also when it does not fit in 32 bits). */
int risk_price_parse(const char *text, uint32_t *out);

/* The notional of shares at price, in price units x shares (never
 * overflows: both are 32-bit). */
static inline uint64_t risk_notional(uint32_t shares, uint32_t price)
{
	return (uint64_t)shares * price;
}

#endif
