/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the library and its tools: how a section is added to a
 * pf_report (loader/report/report.c).  The JSON helpers every section's
 * members go through (jansson; never printf), and the text a section
 * builds, are common/json_internal.h's. */
#ifndef PF_REPORT_INTERNAL_H
#define PF_REPORT_INTERNAL_H

#include "json_internal.h"
#include "podfeed.h"

/* The kinds of section a report holds, each at most once. */
typedef enum pf_report_kind {
	PF_SECTION_LOADER = 0,
	PF_SECTION_BASELINE,
	PF_SECTION_REGIONS,
	PF_SECTION_TRAIN,
	PF_SECTION_POD,
	PF_SECTION_SERIES,
	PF_SECTION_LADDER,
	PF_SECTION_SOURCES,	/* a mixture's sources (report_sources.c) */
	PF_SECTION_KINDS,
} pf_report_kind;

/*! Add a section: its text (taken: pf_text_free()d here, also on
 *  failure) and the members of members merged into the report's object
 *  (decref'd here).  bad: a member could not be made.  @return 0,
 *  -EEXIST (a section of that kind is there), -ENOMEM; err says which. */
int pf_report_section(pf_report *r, pf_report_kind kind, pf_text *text, json_t *members,
		      bool bad, pf_error *err);

/*! The report as its HTML page (report_html.c), as pf_report_format()
 *  writes it: @return its length, or -ENOMEM. */
int64_t pf_report_html(const pf_report *r, char *dst, size_t cap);

#endif
