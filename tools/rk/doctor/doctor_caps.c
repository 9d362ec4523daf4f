/*
 * doctor_caps.c - what the devices can do for the library's features:
 * memory windows of type 2, which one-sided exports (xfer.h) use to revoke
 * one peer's access without touching the others'.
 */
#include <string.h>

#include <infiniband/verbs.h>

#include "doctor.h"

/* One line per device (ports of one device share its capabilities). */
void doc_check_caps(struct doc_report *r)
{
	struct json_object *facts = doc_fact(r, "caps");
	struct ibv_device **list;
	int n = 0;

	if (!r->uverbs_ok) {
		doc_add(r, DOC_SKIP, "mw", NULL,
			"memory windows: not checked: needs read-write access to "
			"/dev/infiniband/uverbs*");
		return;
	}
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr a;
		int mw2;

		if (!ctx || ibv_query_device(ctx, &a)) {
			doc_add(r, DOC_SKIP, "mw", NULL,
				"%s: memory windows: not checked: cannot open the device", name);
			if (ctx)
				ibv_close_device(ctx);
			continue;
		}
		ibv_close_device(ctx);
		mw2 = (a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
		json_object_object_add(facts, name, json_object_new_boolean(mw2));
		if (mw2)
			doc_add(r, DOC_OK, "mw", NULL,
				"%s: memory windows type 2: yes (one-sided exports are bound per "
				"connection and revoked by invalidation)",
				name);
		else
			doc_add(r, DOC_OK, "mw", NULL,
				"%s: memory windows type 2: no (one-sided exports use a "
				"registration per peer: give each peer its own PD)",
				name);
	}
	if (list)
		ibv_free_device_list(list);
}
