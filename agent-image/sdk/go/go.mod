module flowsvc.dev/sdk

go 1.19
