from cxlkv.sw.cli import main

raise SystemExit(main())
