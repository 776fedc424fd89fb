! conv2d forward, backward data, backward filter and bias gradient on the GPU,
! from Fortran: the CUDA runtime (cudaMalloc, cudaMemcpy) and cuDNN's C API
! (tensor, filter and convolution descriptors; cudnnConvolutionForward,
! cudnnConvolutionBackwardData, cudnnConvolutionBackwardFilter,
! cudnnConvolutionBackwardBias, cudnnAddTensor) on device memory, as a CUDA
! Fortran CNN calls them. Plain gfortran with iso_c_binding: the libraries are
! loaded at run time with dlopen (no CUDA or cuDNN at build time), from the
! paths in the environment variables NUMORACLE_CUDART and NUMORACLE_CUDNN
! (default: the sonames libcudart.so and libcudnn.so.9).
!
! Build:  gfortran -O2 -cpp -shared -fPIC conv2d_cudnn.F90 -o libconv2d_cudnn.so
!
! The program's arrays, as its C caller hands them (bind(c), host memory):
!   x(W, H, C, N), grad_output(Wo, Ho, O, N), y(Wo, Ho, O, N), grad_input(W, H, C, N):
!     Fortran arrays of the reversed axes, i.e. cuDNN's row-major NCHW;
!   w(O, C/groups, kH, kW), grad_weight(O, C/groups, kH, kW): the weights as the
!     model declares them, (out, in, k, k) in Fortran's column-major order, which
!     is NOT cuDNN's row-major (out, in, kh, kw): they are transposed into
!     wt(kW, kH, C/groups, O) on the way to the device and back on the way out.
!
! Seed 000's weight-layout trap, both sides:
!   -DLAYOUT_TRAP_GRAD  grad_weight is copied back as cuDNN wrote it, "not
!                       transformed like the weights"
!   -DLAYOUT_TRAP       the weights go to cuDNN as declared, untransposed
!
! Status: 0, or 100 * step + the CUDA/cuDNN error code, with a message on
! stderr (step 1: loading the libraries, 2: descriptors, 3: device memory and
! copies, 4: forward, 5: backward data, 6: backward filter, 7: bias).
module conv2d_cudnn_mod
  use iso_c_binding
  implicit none
  private
  public :: conv2d_cudnn

  integer(c_int), parameter :: RTLD_NOW = 2, RTLD_GLOBAL = 256
  integer(c_int), parameter :: H2D = 1, D2H = 2
  integer(c_int), parameter :: NCHW = 0, FLOAT32 = 0, CROSS_CORRELATION = 1, FMA_MATH = 3
  integer(c_int), parameter :: FWD_IMPLICIT_GEMM = 0, BWD_DATA_ALGO_0 = 0, BWD_FILTER_ALGO_0 = 0

  interface
    function c_dlopen(file, mode) bind(c, name="dlopen") result(h)
      import :: c_ptr, c_char, c_int
      character(kind=c_char), dimension(*), intent(in) :: file
      integer(c_int), value :: mode
      type(c_ptr) :: h
    end function
    function c_dlsym(h, name) bind(c, name="dlsym") result(f)
      import :: c_ptr, c_funptr, c_char
      type(c_ptr), value :: h
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_funptr) :: f
    end function
    function c_getenv(name) bind(c, name="getenv") result(p)
      import :: c_ptr, c_char
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_ptr) :: p
    end function
    function c_strlen(s) bind(c, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
    function c_write(fd, buf, n) bind(c, name="write") result(k)
      import :: c_int, c_ptr, c_size_t, c_long
      integer(c_int), value :: fd
      type(c_ptr), value :: buf
      integer(c_size_t), value :: n
      integer(c_long) :: k
    end function
  end interface

  abstract interface
    integer(c_int) function f_out(p) bind(c)        ! f(T *out): cudnnCreate, cudnnCreate*Descriptor
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: p
    end function
    integer(c_int) function f_in(p) bind(c)         ! f(T): cudnnDestroy*, cudaFree
      import :: c_int, c_ptr
      type(c_ptr), value :: p
    end function
    integer(c_int) function f_malloc(p, n) bind(c)  ! cudaMalloc(void **, size_t)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), intent(out) :: p
      integer(c_size_t), value :: n
    end function
    integer(c_int) function f_memcpy(dst, src, n, kind) bind(c)  ! cudaMemcpy
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: n
      integer(c_int), value :: kind
    end function
    integer(c_int) function f_void() bind(c)        ! cudaDeviceSynchronize
      import :: c_int
    end function
    type(c_ptr) function f_errstr(code) bind(c)     ! cudaGetErrorString, cudnnGetErrorString
      import :: c_int, c_ptr
      integer(c_int), value :: code
    end function
    integer(c_int) function f_tensor(d, a, b, n, c, h, w) bind(c)  ! Set{Tensor,Filter}4dDescriptor
      import :: c_int, c_ptr
      type(c_ptr), value :: d
      integer(c_int), value :: a, b, n, c, h, w
    end function
    integer(c_int) function f_conv2d(d, ph, pw, u, v, dh, dw, mode, dtype) bind(c)
      import :: c_int, c_ptr
      type(c_ptr), value :: d
      integer(c_int), value :: ph, pw, u, v, dh, dw, mode, dtype
    end function
    integer(c_int) function f_setint(d, v) bind(c)  ! SetConvolutionGroupCount, ...MathType
      import :: c_int, c_ptr
      type(c_ptr), value :: d
      integer(c_int), value :: v
    end function
    integer(c_int) function f_wsize(h, a, b, conv, c, algo, size) bind(c)  ! Get*WorkspaceSize
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: h, a, b, conv, c
      integer(c_int), value :: algo
      integer(c_size_t), intent(out) :: size
    end function
    integer(c_int) function f_conv(h, alpha, ad, a, bd, b, conv, algo, ws, wss, beta, cd, c) &
        bind(c)                                      ! Convolution{Forward,BackwardData,BackwardFilter}
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: h, alpha, ad, a, bd, b, conv, ws, beta, cd, c
      integer(c_int), value :: algo
      integer(c_size_t), value :: wss
    end function
    integer(c_int) function f_axpby(h, alpha, ad, a, beta, cd, c) bind(c)  ! AddTensor, BackwardBias
      import :: c_int, c_ptr
      type(c_ptr), value :: h, alpha, ad, a, beta, cd, c
    end function
  end interface

  logical, save :: loaded = .false.
  type(c_ptr), save :: handle = c_null_ptr
  real(c_float), target, save :: one = 1.0_c_float, zero = 0.0_c_float
  procedure(f_malloc), pointer, save :: cudaMalloc => null()
  procedure(f_in), pointer, save :: cudaFree => null()
  procedure(f_memcpy), pointer, save :: cudaMemcpy => null()
  procedure(f_void), pointer, save :: cudaDeviceSynchronize => null()
  procedure(f_errstr), pointer, save :: cudaGetErrorString => null(), cudnnGetErrorString => null()
  procedure(f_out), pointer, save :: cudnnCreate => null(), cudnnCreateTensorDescriptor => null(), &
      cudnnCreateFilterDescriptor => null(), cudnnCreateConvolutionDescriptor => null()
  procedure(f_in), pointer, save :: cudnnDestroyTensorDescriptor => null(), &
      cudnnDestroyFilterDescriptor => null(), cudnnDestroyConvolutionDescriptor => null()
  procedure(f_tensor), pointer, save :: cudnnSetTensor4dDescriptor => null(), &
      cudnnSetFilter4dDescriptor => null()
  procedure(f_conv2d), pointer, save :: cudnnSetConvolution2dDescriptor => null()
  procedure(f_setint), pointer, save :: cudnnSetConvolutionGroupCount => null(), &
      cudnnSetConvolutionMathType => null()
  procedure(f_wsize), pointer, save :: cudnnGetConvolutionForwardWorkspaceSize => null(), &
      cudnnGetConvolutionBackwardDataWorkspaceSize => null(), &
      cudnnGetConvolutionBackwardFilterWorkspaceSize => null()
  procedure(f_conv), pointer, save :: cudnnConvolutionForward => null(), &
      cudnnConvolutionBackwardData => null(), cudnnConvolutionBackwardFilter => null()
  procedure(f_axpby), pointer, save :: cudnnAddTensor => null(), &
      cudnnConvolutionBackwardBias => null()

contains

  subroutine say(text)
    character(len=*), intent(in) :: text
    character(kind=c_char, len=len(text) + 1), target :: buf
    integer(c_long) :: k
    buf = text // achar(10)
    k = c_write(2_c_int, c_loc(buf), int(len(buf), c_size_t))
  end subroutine

  function c_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function

  function library(var, default) result(path)
    character(len=*), intent(in) :: var, default
    character(len=:), allocatable :: path
    path = c_string(c_getenv(var // c_null_char))
    if (len(path) == 0) path = default
  end function

  function sym(lib, name, ok) result(f)
    type(c_ptr), intent(in) :: lib
    character(len=*), intent(in) :: name
    logical, intent(inout) :: ok
    type(c_funptr) :: f
    f = c_dlsym(lib, name // c_null_char)
    if (.not. c_associated(f)) then
      call say("conv2d_cudnn: symbol " // name // " not found")
      ok = .false.
    end if
  end function

  integer(c_int) function load() result(status)
    type(c_ptr) :: rt, dnn
    character(len=:), allocatable :: rt_path, dnn_path
    logical :: ok
    status = 0
    if (loaded) return
    rt_path = library("NUMORACLE_CUDART", "libcudart.so")
    dnn_path = library("NUMORACLE_CUDNN", "libcudnn.so.9")
    rt = c_dlopen(rt_path // c_null_char, ior(RTLD_NOW, RTLD_GLOBAL))
    dnn = c_dlopen(dnn_path // c_null_char, ior(RTLD_NOW, RTLD_GLOBAL))
    if (.not. c_associated(rt) .or. .not. c_associated(dnn)) then
      call say("conv2d_cudnn: cannot dlopen " // rt_path // " or " // dnn_path // &
               "; set NUMORACLE_CUDART and NUMORACLE_CUDNN to the libraries' paths")
      status = 101
      return
    end if
    ok = .true.
    call c_f_procpointer(sym(rt, "cudaMalloc", ok), cudaMalloc)
    call c_f_procpointer(sym(rt, "cudaFree", ok), cudaFree)
    call c_f_procpointer(sym(rt, "cudaMemcpy", ok), cudaMemcpy)
    call c_f_procpointer(sym(rt, "cudaDeviceSynchronize", ok), cudaDeviceSynchronize)
    call c_f_procpointer(sym(rt, "cudaGetErrorString", ok), cudaGetErrorString)
    call c_f_procpointer(sym(dnn, "cudnnGetErrorString", ok), cudnnGetErrorString)
    call c_f_procpointer(sym(dnn, "cudnnCreate", ok), cudnnCreate)
    call c_f_procpointer(sym(dnn, "cudnnCreateTensorDescriptor", ok), cudnnCreateTensorDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnCreateFilterDescriptor", ok), cudnnCreateFilterDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnCreateConvolutionDescriptor", ok), &
                         cudnnCreateConvolutionDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnDestroyTensorDescriptor", ok), &
                         cudnnDestroyTensorDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnDestroyFilterDescriptor", ok), &
                         cudnnDestroyFilterDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnDestroyConvolutionDescriptor", ok), &
                         cudnnDestroyConvolutionDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnSetTensor4dDescriptor", ok), cudnnSetTensor4dDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnSetFilter4dDescriptor", ok), cudnnSetFilter4dDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnSetConvolution2dDescriptor", ok), &
                         cudnnSetConvolution2dDescriptor)
    call c_f_procpointer(sym(dnn, "cudnnSetConvolutionGroupCount", ok), &
                         cudnnSetConvolutionGroupCount)
    call c_f_procpointer(sym(dnn, "cudnnSetConvolutionMathType", ok), cudnnSetConvolutionMathType)
    call c_f_procpointer(sym(dnn, "cudnnGetConvolutionForwardWorkspaceSize", ok), &
                         cudnnGetConvolutionForwardWorkspaceSize)
    call c_f_procpointer(sym(dnn, "cudnnGetConvolutionBackwardDataWorkspaceSize", ok), &
                         cudnnGetConvolutionBackwardDataWorkspaceSize)
    call c_f_procpointer(sym(dnn, "cudnnGetConvolutionBackwardFilterWorkspaceSize", ok), &
                         cudnnGetConvolutionBackwardFilterWorkspaceSize)
    call c_f_procpointer(sym(dnn, "cudnnConvolutionForward", ok), cudnnConvolutionForward)
    call c_f_procpointer(sym(dnn, "cudnnConvolutionBackwardData", ok), &
                         cudnnConvolutionBackwardData)
    call c_f_procpointer(sym(dnn, "cudnnConvolutionBackwardFilter", ok), &
                         cudnnConvolutionBackwardFilter)
    call c_f_procpointer(sym(dnn, "cudnnConvolutionBackwardBias", ok), &
                         cudnnConvolutionBackwardBias)
    call c_f_procpointer(sym(dnn, "cudnnAddTensor", ok), cudnnAddTensor)
    if (.not. ok) then
      status = 102
      return
    end if
    status = cudnnCreate(handle)
    if (status /= 0) then
      call say("conv2d_cudnn: cudnnCreate failed: " // c_string(cudnnGetErrorString(status)))
      status = 100 + status
      return
    end if
    loaded = .true.
  end function

  ! a CUDA (cuda = .true.) or cuDNN status: 0, or 100 * step + code, said on stderr
  integer(c_int) function checked(code, step, what, cuda) result(status)
    integer(c_int), intent(in) :: code
    integer, intent(in) :: step
    character(len=*), intent(in) :: what
    logical, intent(in) :: cuda
    status = 0
    if (code == 0) return
    if (cuda) then
      call say("conv2d_cudnn: " // what // ": " // c_string(cudaGetErrorString(code)))
    else
      call say("conv2d_cudnn: " // what // ": " // c_string(cudnnGetErrorString(code)))
    end if
    status = int(100 * step, c_int) + code
  end function

  integer(c_int) function conv2d_cudnn(x, w, b_p, go, y, gi, gw, gb_p, n, c, o, h, wd, kh, kw, &
      sh, sw, ph, pw, dh, dw, g, has_bias) result(status) bind(c, name="conv2d_cudnn")
    integer(c_int32_t), value :: n, c, o, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, g, has_bias
    type(c_ptr), value :: b_p, gb_p
    real(c_float), intent(in), target :: x(wd, h, c, n), w(o, c / g, kh, kw)
    real(c_float), intent(in), target :: go((wd + 2*pw - dw*(kw - 1) - 1) / sw + 1, &
                                            (h + 2*ph - dh*(kh - 1) - 1) / sh + 1, o, n)
    real(c_float), intent(out), target :: y((wd + 2*pw - dw*(kw - 1) - 1) / sw + 1, &
                                            (h + 2*ph - dh*(kh - 1) - 1) / sh + 1, o, n)
    real(c_float), intent(out), target :: gi(wd, h, c, n), gw(o, c / g, kh, kw)
    real(c_float), allocatable, target :: wt(:, :, :, :)
    type(c_ptr) :: xd, yd, bd, wdsc, cd, d_x, d_w, d_y, d_go, d_gi, d_gw, d_b, d_gb, d_ws
    integer(c_size_t) :: ws, s1, s2, s3, nx, ny, nw, nb
    integer :: ho, wo, cg, oc, ic, ky, kx

    ho = (h + 2*ph - dh*(kh - 1) - 1) / sh + 1
    wo = (wd + 2*pw - dw*(kw - 1) - 1) / sw + 1
    cg = c / g
    nx = 4_c_size_t * n * c * h * wd
    ny = 4_c_size_t * n * o * ho * wo
    nw = 4_c_size_t * o * cg * kh * kw
    nb = 4_c_size_t * o
    xd = c_null_ptr; yd = c_null_ptr; bd = c_null_ptr; wdsc = c_null_ptr; cd = c_null_ptr
    d_x = c_null_ptr; d_w = c_null_ptr; d_y = c_null_ptr; d_go = c_null_ptr
    d_gi = c_null_ptr; d_gw = c_null_ptr; d_b = c_null_ptr; d_gb = c_null_ptr
    d_ws = c_null_ptr

    status = load()
    if (status /= 0) return
    ! cuDNN reads the filter as row-major (O, C/g, kH, kW): the Fortran array wt(kW, kH, C/g, O)
    allocate(wt(kw, kh, cg, o))
    do oc = 1, o
      do ic = 1, cg
        do ky = 1, kh
          do kx = 1, kw
            wt(kx, ky, ic, oc) = w(oc, ic, ky, kx)
          end do
        end do
      end do
    end do

    ! descriptors
    status = checked(cudnnCreateTensorDescriptor(xd), 2, "cudnnCreateTensorDescriptor", .false.)
    if (status == 0) status = checked(cudnnCreateTensorDescriptor(yd), 2, &
                                      "cudnnCreateTensorDescriptor", .false.)
    if (status == 0) status = checked(cudnnCreateTensorDescriptor(bd), 2, &
                                      "cudnnCreateTensorDescriptor", .false.)
    if (status == 0) status = checked(cudnnCreateFilterDescriptor(wdsc), 2, &
                                      "cudnnCreateFilterDescriptor", .false.)
    if (status == 0) status = checked(cudnnCreateConvolutionDescriptor(cd), 2, &
                                      "cudnnCreateConvolutionDescriptor", .false.)
    if (status == 0) status = checked(cudnnSetTensor4dDescriptor(xd, NCHW, FLOAT32, n, c, h, wd), &
                                      2, "cudnnSetTensor4dDescriptor(x)", .false.)
    if (status == 0) status = checked(cudnnSetTensor4dDescriptor(yd, NCHW, FLOAT32, n, o, ho, wo), &
                                      2, "cudnnSetTensor4dDescriptor(y)", .false.)
    if (status == 0) status = checked(cudnnSetTensor4dDescriptor(bd, NCHW, FLOAT32, 1, o, 1, 1), &
                                      2, "cudnnSetTensor4dDescriptor(bias)", .false.)
    if (status == 0) status = checked(cudnnSetFilter4dDescriptor(wdsc, FLOAT32, NCHW, o, cg, kh, &
                                      kw), 2, "cudnnSetFilter4dDescriptor", .false.)
    if (status == 0) status = checked(cudnnSetConvolution2dDescriptor(cd, ph, pw, sh, sw, dh, dw, &
                                      CROSS_CORRELATION, FLOAT32), 2, &
                                      "cudnnSetConvolution2dDescriptor", .false.)
    if (status == 0) status = checked(cudnnSetConvolutionGroupCount(cd, g), 2, &
                                      "cudnnSetConvolutionGroupCount", .false.)
    ! plain fp32 arithmetic: no TF32 tensor cores
    if (status == 0) status = checked(cudnnSetConvolutionMathType(cd, FMA_MATH), 2, &
                                      "cudnnSetConvolutionMathType", .false.)
    ! workspaces
    s1 = 0; s2 = 0; s3 = 0
    if (status == 0) status = checked(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wdsc, &
                                      cd, yd, FWD_IMPLICIT_GEMM, s1), 2, &
                                      "cudnnGetConvolutionForwardWorkspaceSize", .false.)
    if (status == 0) status = checked(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, wdsc, &
                                      yd, cd, xd, BWD_DATA_ALGO_0, s2), 2, &
                                      "cudnnGetConvolutionBackwardDataWorkspaceSize", .false.)
    if (status == 0) status = checked(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xd, &
                                      yd, cd, wdsc, BWD_FILTER_ALGO_0, s3), 2, &
                                      "cudnnGetConvolutionBackwardFilterWorkspaceSize", .false.)
    ws = max(s1, s2, s3)
    ! device memory
    if (status == 0) status = checked(cudaMalloc(d_x, nx), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMalloc(d_gi, nx), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMalloc(d_y, ny), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMalloc(d_go, ny), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMalloc(d_w, nw), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMalloc(d_gw, nw), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMalloc(d_b, nb), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMalloc(d_gb, nb), 3, "cudaMalloc", .true.)
    if (status == 0 .and. ws > 0) status = checked(cudaMalloc(d_ws, ws), 3, "cudaMalloc", .true.)
    if (status == 0) status = checked(cudaMemcpy(d_x, c_loc(x), nx, H2D), 3, "cudaMemcpy(x)", &
                                      .true.)
    if (status == 0) status = checked(cudaMemcpy(d_go, c_loc(go), ny, H2D), 3, &
                                      "cudaMemcpy(grad_output)", .true.)
#ifdef LAYOUT_TRAP
    ! the trap: w(out, in, kh, kw) handed to cuDNN as it is declared
    if (status == 0) status = checked(cudaMemcpy(d_w, c_loc(w), nw, H2D), 3, "cudaMemcpy(w)", &
                                      .true.)
#else
    if (status == 0) status = checked(cudaMemcpy(d_w, c_loc(wt), nw, H2D), 3, "cudaMemcpy(w)", &
                                      .true.)
#endif
    if (status == 0 .and. has_bias /= 0) status = checked(cudaMemcpy(d_b, b_p, nb, H2D), 3, &
                                                          "cudaMemcpy(bias)", .true.)
    ! forward: y = conv(x, w) (+ bias)
    if (status == 0) status = checked(cudnnConvolutionForward(handle, c_loc(one), xd, d_x, &
                                      wdsc, d_w, cd, FWD_IMPLICIT_GEMM, d_ws, ws, c_loc(zero), &
                                      yd, d_y), 4, "cudnnConvolutionForward", .false.)
    if (status == 0 .and. has_bias /= 0) status = checked(cudnnAddTensor(handle, c_loc(one), &
                                      bd, d_b, c_loc(one), yd, d_y), 4, "cudnnAddTensor", .false.)
    ! backward data: grad_input
    if (status == 0) status = checked(cudnnConvolutionBackwardData(handle, c_loc(one), wdsc, &
                                      d_w, yd, d_go, cd, BWD_DATA_ALGO_0, d_ws, ws, c_loc(zero), &
                                      xd, d_gi), 5, "cudnnConvolutionBackwardData", .false.)
    ! backward filter: grad_weight
    if (status == 0) status = checked(cudnnConvolutionBackwardFilter(handle, c_loc(one), xd, &
                                      d_x, yd, d_go, cd, BWD_FILTER_ALGO_0, d_ws, ws, &
                                      c_loc(zero), wdsc, d_gw), 6, &
                                      "cudnnConvolutionBackwardFilter", .false.)
    if (status == 0 .and. has_bias /= 0) status = checked(cudnnConvolutionBackwardBias(handle, &
                                      c_loc(one), yd, d_go, c_loc(zero), bd, d_gb), 7, &
                                      "cudnnConvolutionBackwardBias", .false.)
    if (status == 0) status = checked(cudaDeviceSynchronize(), 3, "cudaDeviceSynchronize", .true.)
    ! results back to the host
    if (status == 0) status = checked(cudaMemcpy(c_loc(y), d_y, ny, D2H), 3, "cudaMemcpy(y)", &
                                      .true.)
    if (status == 0) status = checked(cudaMemcpy(c_loc(gi), d_gi, nx, D2H), 3, &
                                      "cudaMemcpy(grad_input)", .true.)
#ifdef LAYOUT_TRAP_GRAD
    ! the trap: the gradient comes back as cuDNN wrote it, "not transformed like the weights"
    if (status == 0) status = checked(cudaMemcpy(c_loc(gw), d_gw, nw, D2H), 3, &
                                      "cudaMemcpy(grad_weight)", .true.)
#else
    if (status == 0) status = checked(cudaMemcpy(c_loc(wt), d_gw, nw, D2H), 3, &
                                      "cudaMemcpy(grad_weight)", .true.)
    if (status == 0) then
      do kx = 1, kw
        do ky = 1, kh
          do ic = 1, cg
            do oc = 1, o
              gw(oc, ic, ky, kx) = wt(kx, ky, ic, oc)
            end do
          end do
        end do
      end do
    end if
#endif
    if (status == 0 .and. has_bias /= 0) status = checked(cudaMemcpy(gb_p, d_gb, nb, D2H), 3, &
                                                          "cudaMemcpy(grad_bias)", .true.)
    ! release, whatever happened
    if (c_associated(d_ws)) ky = cudaFree(d_ws)
    if (c_associated(d_gb)) ky = cudaFree(d_gb)
    if (c_associated(d_b)) ky = cudaFree(d_b)
    if (c_associated(d_gw)) ky = cudaFree(d_gw)
    if (c_associated(d_w)) ky = cudaFree(d_w)
    if (c_associated(d_go)) ky = cudaFree(d_go)
    if (c_associated(d_y)) ky = cudaFree(d_y)
    if (c_associated(d_gi)) ky = cudaFree(d_gi)
    if (c_associated(d_x)) ky = cudaFree(d_x)
    if (c_associated(cd)) ky = cudnnDestroyConvolutionDescriptor(cd)
    if (c_associated(wdsc)) ky = cudnnDestroyFilterDescriptor(wdsc)
    if (c_associated(bd)) ky = cudnnDestroyTensorDescriptor(bd)
    if (c_associated(yd)) ky = cudnnDestroyTensorDescriptor(yd)
    if (c_associated(xd)) ky = cudnnDestroyTensorDescriptor(xd)
    deallocate(wt)
  end function
end module conv2d_cudnn_mod
