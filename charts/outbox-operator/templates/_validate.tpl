{{/*
Combinations of values that would install something broken or silently incomplete.
values.schema.json checks each value alone; these compare values with each other.
deployment.yaml includes this, so every install runs it.
*/}}
{{- define "outbox-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled=true: two managers without a leader would both reconcile" }}
{{- end }}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) (int .Values.healthProbe.port)) }}
{{- fail (printf "metrics.port and healthProbe.port are both %d: the manager cannot serve /metrics and /healthz on one port; give one of them another port" (int .Values.metrics.port)) }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled=true needs metrics.enabled=true: with metrics off there is nothing to scrape and no ServiceMonitor would be rendered" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) }}
{{- fail "metrics.serviceMonitor.enabled=true needs metrics.service.enabled=true: the ServiceMonitor selects the metrics Service" }}
{{- end }}
{{- if and .Values.prometheusRule.enabled (not .Values.metrics.enabled) }}
{{- fail "prometheusRule.enabled=true needs metrics.enabled=true: most alerts read the manager's outbox_pipeline_* metrics, and would never fire" }}
{{- end }}
{{- if and (gt (int .Values.kubeAPIBurst) 0) (eq (float64 .Values.kubeAPIQPS) 0.0) }}
{{- fail "kubeAPIBurst needs kubeAPIQPS: without a qps the manager's client has no limit to burst above (the manager refuses to start)" }}
{{- end }}
{{- end -}}
