module flowsvc.dev/sdk-driver

go 1.19

require flowsvc.dev/sdk v0.0.0

replace flowsvc.dev/sdk => ../../sdk/go
